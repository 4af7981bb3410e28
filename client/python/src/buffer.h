#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include <pybind11/pybind11.h>

#include "memd/client.h"

namespace memd::python {

namespace py = pybind11;

/// The Python memd.Buffer: owns one memd::Buffer (a lease and its mapping)
/// and counts the views exported from it (buffer-protocol views, DLPack
/// capsules), so that the mapping outlives every view.
///
/// release() marks the object released at once (name, size, info stay
/// readable; new views raise ValueError). With no live view the lease ends
/// then; otherwise the memd::Buffer is kept, lease and mapping, until the
/// last view dies, and ended then (its errors dropped, as ~Buffer drops
/// them). A consumer never holds a dangling pointer.
///
/// Thread-safety: the state below is guarded by the GIL; the memd::Buffer,
/// which is not thread-safe and whose calls are RPCs made with the GIL
/// released, only under lease_mu_ (taken with the GIL released, so a thread
/// waiting for it never blocks one that needs the GIL to finish). State that
/// an RPC will change is set before the GIL is let go (released_,
/// sealing_), so other threads see the outcome they must; a call in flight
/// counts as a view (Use), so the lease cannot end under it.
///
/// Errors: memd.Error subclasses for what the daemon refuses; ValueError
/// once released; BufferError for a seal while writable views live.
class PyBuffer {
 public:
  explicit PyBuffer(Buffer buffer);
  ~PyBuffer();
  PyBuffer(const PyBuffer&) = delete;
  PyBuffer& operator=(const PyBuffer&) = delete;

  const BufferInfo& info() const { return info_; }
  const std::string& name() const { return info_.name; }
  std::uint64_t size() const { return info_.size; }
  bool writable() const { return writable_; }
  bool created() const { return created_; }
  bool sealed() const { return info_.state == BufferState::kSealed; }
  bool released() const { return released_; }
  std::uint64_t lease_id() const { return lease_id_; }
  bool is_device() const { return is_device_; }
  int device() const { return device_; }
  // On a Level Zero GPU (DLPack kDLOneAPI, no __cuda_array_interface__).
  bool is_level_zero() const { return is_level_zero_; }
  DevicePointer device_pointer() const { return device_pointer_; }
  // Host bytes; null for device buffers.
  std::byte* host_data() const { return host_data_; }
  // Whether views handed out now must be read-only: a read lease, or a
  // buffer sealed (or being sealed) whose contents are final.
  bool exports_readonly() const { return !writable_ || sealed() || sealing_; }
  int live_views() const { return views_; }
  int live_writable_views() const { return writable_views_; }

  // ValueError once released.
  void CheckUsable() const;

  // A view was handed out / let go (GIL held). The last EndView after
  // release() ends the lease.
  void BeginView(bool writable);
  void EndView(bool writable);

  // Makes the contents final. BufferError while writable views live (they
  // could change the bytes readers now trust); the daemon's errors
  // otherwise (FAILED_PRECONDITION for a read lease or a second seal).
  void Seal();

  // Idempotent; see the class comment. Raises the daemon's error when the
  // lease ends now and the daemon refuses.
  void Release();

  // A call that uses the lease with the GIL released (Seal, Client.copy):
  // made with the GIL held, it counts as a read-only view, so a release()
  // meanwhile waits for the call (as for any view) instead of destroying
  // the Buffer under it. Destroy it with the GIL held.
  class Use {
   public:
    explicit Use(PyBuffer& buffer) : buffer_(buffer) {
      buffer_.CheckUsable();
      buffer_.BeginView(false);
    }
    ~Use() { buffer_.EndView(false); }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;
    // Only with lease_mutex() held, GIL released.
    Buffer& lease() const { return *buffer_.buffer_; }

   private:
    PyBuffer& buffer_;
  };
  std::mutex& lease_mutex() { return lease_mu_; }

 private:
  // Ends the lease (GIL held on entry; let go for the RPC).
  absl::Status EndLease();

  std::mutex lease_mu_;
  std::unique_ptr<Buffer> buffer_;  // Null once the lease ended.
  BufferInfo info_;                 // Ours: Seal rewrites the Buffer's.
  std::byte* host_data_ = nullptr;
  DevicePointer device_pointer_ = 0;
  int device_ = -1;
  bool is_device_ = false;
  bool is_level_zero_ = false;
  bool writable_ = false;
  bool created_ = false;
  std::uint64_t lease_id_ = 0;
  bool released_ = false;
  bool sealing_ = false;
  int views_ = 0;
  int writable_views_ = 0;
};

}  // namespace memd::python
