#include "client/python/src/buffer.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/python/src/errors.h"

namespace memd::python {

PyBuffer::PyBuffer(Buffer buffer)
    : buffer_(std::make_unique<Buffer>(std::move(buffer))),
      info_(buffer_->info()),
      device_pointer_(buffer_->device_pointer()),
      device_(buffer_->device()),
      is_device_(absl::StartsWith(buffer_->info().location, "device:")),
      is_level_zero_(buffer_->level_zero()),
      writable_(buffer_->writable()),
      created_(buffer_->created()),
      lease_id_(buffer_->lease_id()) {
  // Taken once: the pointer is stable while the lease lives, and reading it
  // later would race with a Seal rewriting the Buffer's info on another
  // thread.
  host_data_ = writable_ ? buffer_->mutable_data().data()
                         : const_cast<std::byte*>(buffer_->data().data());
}

PyBuffer::~PyBuffer() {
  // Views hold a reference to this object, so none is alive here. ~Buffer
  // ends the lease with an RPC: not while holding the GIL.
  if (buffer_ != nullptr) {
    std::unique_ptr<Buffer> buffer = std::move(buffer_);
    py::gil_scoped_release unlocked;
    std::lock_guard<std::mutex> lock(lease_mu_);
    buffer.reset();
  }
}

void PyBuffer::CheckUsable() const {
  if (released_) {
    throw py::value_error(absl::StrCat("buffer '", info_.name, "' is released"));
  }
}

void PyBuffer::BeginView(bool writable) {
  ++views_;
  if (writable) ++writable_views_;
}

void PyBuffer::EndView(bool writable) {
  --views_;
  if (writable) --writable_views_;
  if (views_ == 0 && released_ && buffer_ != nullptr) (void)EndLease();
}

void PyBuffer::Seal() {
  CheckUsable();
  if (writable_views_ > 0) {
    throw py::buffer_error(absl::StrCat(
        "buffer '", info_.name, "' has ", writable_views_,
        " writable view(s) alive (memoryview, numpy array, DLPack export): "
        "let them go (del, memoryview.release()) before seal(), which makes the "
        "contents final"));
  }
  absl::Status status;
  {
    Use use(*this);
    sealing_ = true;  // Views handed out meanwhile are read-only.
    BufferInfo info;
    {
      py::gil_scoped_release unlocked;
      std::lock_guard<std::mutex> lock(lease_mu_);
      status = use.lease().Seal();
      if (status.ok()) info = use.lease().info();
    }
    sealing_ = false;
    if (status.ok()) info_ = std::move(info);
  }
  Check(status);
}

void PyBuffer::Release() {
  if (released_) return;
  released_ = true;
  if (views_ > 0) return;  // The last view's EndView ends the lease.
  Check(EndLease());
}

absl::Status PyBuffer::EndLease() {
  std::unique_ptr<Buffer> buffer = std::move(buffer_);
  if (buffer == nullptr) return absl::OkStatus();
  py::gil_scoped_release unlocked;
  // A Seal or a copy on another thread may be using it: wait for it.
  std::lock_guard<std::mutex> lock(lease_mu_);
  absl::Status status = buffer->Release();
  buffer.reset();
  return status;
}

}  // namespace memd::python
