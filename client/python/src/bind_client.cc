// memd.Client and memd.connect: libmemd's Client, every RPC made with the
// GIL released.

#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <pybind11/stl.h>

#include "absl/strings/str_cat.h"
#include "client/python/src/bindings.h"
#include "client/python/src/buffer.h"
#include "client/python/src/errors.h"
#include "client/python/src/records.h"
#include "client/python/src/transfer.h"

namespace memd::python {
namespace {

/// The Python memd.Client. Owns a shared reference to a memd::Client
/// (thread-safe itself); every call copies it first, so close() on one
/// thread never destroys the Client under a call on another. Buffers and
/// Transfers outlive it (libmemd allows that). Errors: ValueError once
/// closed; memd.Error subclasses from the daemon.
class PyClient {
 public:
  explicit PyClient(std::unique_ptr<Client> client)
      : client_(std::move(client)), socket_dir_(client_->socket_dir()) {}

  std::shared_ptr<Client> get() const {
    if (client_ == nullptr) throw py::value_error("this memd.Client is closed");
    return client_;
  }
  bool closed() const { return client_ == nullptr; }
  const std::string& socket_dir() const { return socket_dir_; }

  void Close() {
    std::shared_ptr<Client> client = std::move(client_);
    client_.reset();
    py::gil_scoped_release unlocked;
    client.reset();
  }

 private:
  std::shared_ptr<Client> client_;
  const std::string socket_dir_;
};

// Runs `call` on the client with the GIL released and returns its value.
template <typename Call>
auto Unlocked(const PyClient& self, Call&& call) {
  std::shared_ptr<Client> client = self.get();
  py::gil_scoped_release unlocked;
  return call(*client);
}

std::unique_ptr<PyBuffer> Wrap(absl::StatusOr<Buffer>&& buffer) {
  return std::make_unique<PyBuffer>(Take(std::move(buffer)));
}

std::uint64_t SizeArgument(std::int64_t size) {
  if (size < 0) {
    throw StatusError(absl::InvalidArgumentError(absl::StrCat("size ", size, " is negative")));
  }
  return static_cast<std::uint64_t>(size);
}

CreateOptions MakeCreateOptions(std::string location, std::uint32_t mode, bool persistent,
                                std::optional<std::map<std::string, std::string>> attrs,
                                bool populate) {
  CreateOptions options;
  options.location = std::move(location);
  options.mode = mode;
  options.persistence = persistent ? Persistence::kPersistent : Persistence::kEphemeral;
  if (attrs.has_value()) options.attrs = std::move(*attrs);
  options.populate = populate;
  return options;
}

absl::Duration WaitArgument(const py::object& timeout) {
  return timeout.is_none() ? absl::ZeroDuration() : SecondsArgument(timeout, "timeout");
}

Priority PriorityArgument(const std::string& priority) {
  if (priority == "critical") return Priority::kCritical;
  if (priority == "normal") return Priority::kNormal;
  if (priority == "background") return Priority::kBackground;
  throw py::value_error(absl::StrCat("priority '", priority,
                                     "' is not 'critical', 'normal' or 'background'"));
}

std::unique_ptr<PyClient> Connect(std::optional<std::string> socket_dir,
                                  py::object call_timeout,
                                  std::optional<std::uint64_t> mapping_cache_bytes,
                                  std::optional<uid_t> daemon_uid) {
  ConnectOptions options;
  if (socket_dir.has_value()) options.socket_dir = std::move(*socket_dir);
  if (!call_timeout.is_none()) {
    options.call_timeout = SecondsArgument(call_timeout, "call_timeout");
  }
  if (mapping_cache_bytes.has_value()) options.mapping_cache_bytes = *mapping_cache_bytes;
  options.daemon_uid = daemon_uid;
  absl::StatusOr<std::unique_ptr<Client>> client;
  {
    py::gil_scoped_release unlocked;
    client = Client::Connect(std::move(options));
  }
  return std::make_unique<PyClient>(Take(std::move(client)));
}

constexpr const char kConnectDoc[] = R"doc(Connects to the local memd and returns a Client.

socket_dir: None for $MEMD_SOCKET_DIR, else /run/memd for root, else
$XDG_RUNTIME_DIR/memd, else /tmp/memd-$UID. call_timeout: seconds each call
that does not wait for a seal may take (default 30). mapping_cache_bytes:
read-only mappings kept after their last Buffer is released, for a fast
reopen (default 256 MiB; 0 unmaps at once). daemon_uid: the uid the daemon
must run as (default: $MEMD_DAEMON_UID, else the trusted ones libmemd knows).

Raises UnavailableError (no daemon there), PermissionDeniedError (the
socket's mode, or an untrusted socket directory or daemon), ...)doc";

}  // namespace

absl::Duration SecondsArgument(const py::object& seconds, const char* what) {
  const double value = py::float_(seconds).cast<double>();
  if (!std::isfinite(value) || value < 0) {
    throw py::value_error(absl::StrCat(what, " must be a finite number of seconds >= 0, not ",
                                       py::repr(seconds).cast<std::string>()));
  }
  return absl::Seconds(value);
}

namespace {

// create, open, open_or_create, unlink: the calls that grant or end names.
void BindLeaseCalls(py::class_<PyClient>& client_class) {
  client_class
      .def(
          "create",
          [](const PyClient& self, const std::string& name, std::int64_t nbytes,
             std::string location, std::uint32_t mode, bool persistent,
             std::optional<std::map<std::string, std::string>> attrs, bool populate) {
            const std::uint64_t size = SizeArgument(nbytes);
            CreateOptions options = MakeCreateOptions(std::move(location), mode, persistent,
                                                      std::move(attrs), populate);
            return Wrap(Unlocked(self, [&](Client& c) { return c.Create(name, size, options); }));
          },
          py::arg("name"), py::arg("nbytes"), py::kw_only(), py::arg("location") = "host",
          py::arg_v("mode", 0600, "0o600"), py::arg("persistent") = true,
          py::arg("attrs") = py::none(), py::arg("populate") = false,
          R"doc(Creates a buffer and returns a writable lease on it (not sealed yet).

location: "host", "pinned" or "device:N". mode: permission bits like a
file's (0o600 owner only, 0o640 group may read, 0o666 everyone).
persistent=False: the buffer goes with its last lease even once sealed (a
buffer never sealed goes with its last lease either way). attrs: up to 16
str -> str attributes for readers ("dtype", "shape", "layout" are read by
Buffer.numpy/torch/__dlpack__). populate: map every page now.
Raises AlreadyExistsError, InvalidArgumentError (name, size, mode, location,
attrs), ResourceExhaustedError (pool, quota).)doc")
      .def(
          "create_array",
          [](py::object self, py::object name, py::object shape, py::object dtype,
             py::kwargs kwargs) {
            return py::module_::import("memd._arrays")
                .attr("create_array")(self, name, shape, dtype, **kwargs);
          },
          py::arg("name"), py::arg("shape"), py::arg("dtype"),
          R"doc(create_array(name, shape, dtype, **create_kwargs) -> Buffer

Creates a buffer sized for an array of `shape` and `dtype` (a numpy dtype
or its name, "bfloat16" too) and sets its "dtype" and "shape" attributes
(over any given in attrs), so that numpy(), torch() and __dlpack__ read it
as that array. Other keyword arguments as create().)doc")
      .def(
          "open",
          [](const PyClient& self, const std::string& name, py::object timeout, bool writable,
             std::optional<uid_t> owner, bool populate) {
            OpenOptions options;
            options.access = writable ? Access::kReadWrite : Access::kRead;
            options.wait = WaitArgument(timeout);
            options.owner = owner;
            options.populate = populate;
            return Wrap(Unlocked(self, [&](Client& c) { return c.Open(name, options); }));
          },
          py::arg("name"), py::kw_only(), py::arg("timeout") = py::none(),
          py::arg("writable") = false, py::arg("owner") = py::none(),
          py::arg("populate") = false,
          R"doc(Opens a buffer by name.

Read-only (the default) opens sealed buffers, waiting up to `timeout`
seconds for the name to exist and be sealed (None or 0: fail at once);
writable=True joins a buffer still being written. owner: the uid that must
own the buffer (PermissionDeniedError otherwise) - a consumer that trusts
one producer says which. Raises NotFoundError, DeadlineExceededError (the
wait ran out), PermissionDeniedError, FailedPreconditionError.)doc")
      .def(
          "open_or_create",
          [](const PyClient& self, const std::string& name, std::int64_t nbytes,
             py::object timeout, std::optional<uid_t> owner, std::string location,
             std::uint32_t mode, bool persistent,
             std::optional<std::map<std::string, std::string>> attrs, bool populate) {
            const std::uint64_t size = SizeArgument(nbytes);
            CreateOptions options = MakeCreateOptions(std::move(location), mode, persistent,
                                                      std::move(attrs), populate);
            options.existing_owner = owner;
            const absl::Duration wait = WaitArgument(timeout);
            return Wrap(Unlocked(
                self, [&](Client& c) { return c.OpenOrCreate(name, size, options, wait); }));
          },
          py::arg("name"), py::arg("nbytes"), py::kw_only(), py::arg("timeout") = py::none(),
          py::arg("owner") = py::none(), py::arg("location") = "host", py::arg_v("mode", 0600, "0o600"),
          py::arg("persistent") = true, py::arg("attrs") = py::none(),
          py::arg("populate") = false,
          R"doc(Creates the buffer if the name is free (writable lease, .created True),
else opens it read-only, waiting up to `timeout` seconds for its seal (and
only if `owner`, when given, owns it). Other arguments as create().)doc");
}

// stat, list, stats, sessions, usage, trim, ping and GPU numbering.
void BindQueries(py::class_<PyClient>& client_class) {
  client_class
      .def(
          "unlink",
          [](const PyClient& self, const std::string& name) {
            Check(Unlocked(self, [&](Client& c) { return c.Unlink(name); }));
          },
          py::arg("name"), "Removes the name; leased memory lives until its last lease ends.")
      .def(
          "stat",
          [](const PyClient& self, const std::string& name) {
            return ToPython(Take(Unlocked(self, [&](Client& c) { return c.Stat(name); })));
          },
          py::arg("name"), "A fresh BufferInfo.")
      .def(
          "list",
          [](const PyClient& self, const std::string& prefix) {
            return ToPythonList(Take(Unlocked(self, [&](Client& c) { return c.List(prefix); })));
          },
          py::arg("prefix") = "", "BufferInfo of the buffers this user may read, by name.")
      .def(
          "stats",
          [](const PyClient& self) {
            return ToPython(Take(Unlocked(self, [](Client& c) { return c.Stats(); })));
          },
          "DaemonStats: pools, devices, transfers...")
      .def(
          "sessions",
          [](const PyClient& self) {
            return ToPythonList(Take(Unlocked(self, [](Client& c) { return c.Sessions(); })));
          },
          "SessionInfo of the daemon's sessions.")
      .def(
          "usage",
          [](const PyClient& self) {
            return ToPythonList(Take(Unlocked(self, [](Client& c) { return c.Usage(); })));
          },
          "UidUsage per uid and location, against the uid quota.")
      .def(
          "trim",
          [](const PyClient& self, const std::string& location) {
            return ToPythonList(
                Take(Unlocked(self, [&](Client& c) { return c.Trim(location); })));
          },
          py::arg("location") = "",
          "Gives idle pool memory back to the system (root or the daemon's user only).")
      .def(
          "ping",
          [](const PyClient& self) {
            Check(Unlocked(self, [](Client& c) { return c.Ping(); }));
          },
          "One round trip to the daemon.")
      .def(
          "cuda_device",
          [](const PyClient& self, const std::string& location) {
            return Take(Unlocked(self, [&](Client& c) { return c.CudaDevice(location); }));
          },
          py::arg("location"),
          "This process's CUDA ordinal for memd's \"device:N\" (they differ under "
          "CUDA_VISIBLE_DEVICES).")
      .def(
          "device_location",
          [](const PyClient& self, int cuda_device) {
            return Take(
                Unlocked(self, [&](Client& c) { return c.DeviceLocation(cuda_device); }));
          },
          py::arg("cuda_device"), "memd's \"device:N\" for this process's CUDA device.");
}

// copy: the daemon's transfers.
void BindCopy(py::class_<PyClient>& client_class) {
  client_class
      .def(
          "copy",
          [](const PyClient& self, PyBuffer& source, PyBuffer& destination,
             std::uint64_t src_offset, std::uint64_t dst_offset,
             std::optional<std::uint64_t> length, const std::string& priority,
             py::object deadline, std::uint64_t chunk_bytes) {
            std::shared_ptr<Client> client = self.get();
            CopyOptions options;
            options.priority = PriorityArgument(priority);
            if (!deadline.is_none()) {
              const double at = py::float_(deadline).cast<double>();
              if (!std::isfinite(at)) throw py::value_error("deadline must be finite");
              options.deadline = absl::UnixEpoch() + absl::Seconds(at);
            }
            options.chunk_bytes = chunk_bytes;
            // Both leases stay alive (and unused by other threads) for the call.
            PyBuffer::Use use_source(source);
            PyBuffer::Use use_destination(destination);
            absl::StatusOr<Transfer> transfer;
            {
              py::gil_scoped_release unlocked;
              std::unique_lock<std::mutex> lock_source(source.lease_mutex(), std::defer_lock);
              std::unique_lock<std::mutex> lock_destination(destination.lease_mutex(),
                                                            std::defer_lock);
              if (&source == &destination) {
                lock_source.lock();
              } else {
                std::lock(lock_source, lock_destination);
              }
              transfer = client->Copy(Region{&use_source.lease(), src_offset, length},
                                      Region{&use_destination.lease(), dst_offset, length},
                                      options);
            }
            return std::make_unique<PyTransfer>(Take(std::move(transfer)));
          },
          py::arg("src"), py::arg("dst"), py::kw_only(), py::arg("src_offset") = 0,
          py::arg("dst_offset") = 0, py::arg("length") = py::none(),
          py::arg("priority") = "normal", py::arg("deadline") = py::none(),
          py::arg("chunk_bytes") = 0,
          R"doc(Copies src to dst (Buffers this process holds; dst writable, not sealed)
in the daemon - host to device, device to host, device to device, host to
host - and returns a Transfer at once.

length: bytes of each range (None: each range runs from its offset to the
end of its buffer, and the two must be as long). priority: "critical", "normal" or "background".
deadline: an absolute time.time() value by which the copy must be done
(DeadlineExceededError otherwise). chunk_bytes: 0 for the daemon's default.
Raises InvalidArgumentError, FailedPreconditionError, NotFoundError,
ResourceExhaustedError before anything moves.)doc");
}

}  // namespace

void BindClient(py::module_& module) {
  py::class_<PyClient> client_class(module, "Client", R"doc(A connection to the local memd (memd.connect()).

Thread-safe. A context manager: leaving it closes the client; Buffers and
Transfers made through it stay valid. When the process exits the daemon
releases every lease it held. Every call raises memd.Error subclasses: see
memd.Error. Calls that wait (open with a timeout) release the GIL.)doc");
  client_class
      .def_static("connect", &Connect, py::arg("socket_dir") = py::none(), py::kw_only(),
                  py::arg("call_timeout") = py::none(),
                  py::arg("mapping_cache_bytes") = py::none(),
                  py::arg("daemon_uid") = py::none(), kConnectDoc);
  BindLeaseCalls(client_class);
  BindQueries(client_class);
  BindCopy(client_class);
  client_class
      .def_property_readonly("socket_dir", &PyClient::socket_dir)
      .def_property_readonly("closed", &PyClient::closed)
      .def_property_readonly(
          "session_id",
          [](const PyClient& self) {
            return Unlocked(self, [](Client& c) { return c.session_id(); });
          },
          "This connection's session id (0 when the daemon is unreachable).")
      .def("close", &PyClient::Close,
           "Closes the connection; idempotent. Buffers and Transfers stay valid.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](PyClient& self, py::object, py::object, py::object) {
             self.Close();
             return false;
           })
      .def("__repr__", [](const PyClient& self) {
        return absl::StrCat("<memd.Client socket_dir='", self.socket_dir(), "'",
                            self.closed() ? " closed" : "", ">");
      });

  module.def("connect", &Connect, py::arg("socket_dir") = py::none(), py::kw_only(),
             py::arg("call_timeout") = py::none(), py::arg("mapping_cache_bytes") = py::none(),
             py::arg("daemon_uid") = py::none(), kConnectDoc);
}

}  // namespace memd::python
