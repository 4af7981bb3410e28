// Tests for the asynchronous side of the memd FAKE CUDA driver: streams,
// events, asynchronous copies on per-device copy engines, host functions,
// pinned host memory, the link model, poisoning and fault injection. The
// library is loaded as memd loads a driver (dlopen, dlsym by the versioned
// names), afresh for every test, so each test sets its environment first.
//
// Timing is only ever checked as a lower bound the fake guarantees by
// construction (a modelled copy never lands early) or as an order that a
// margin of a second or more separates; nothing asserts "took < X".

#include <cuda.h>
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;

#define STREAM_ENTRY_POINTS(X)                                     \
  X(Init, cuInit)                                                  \
  X(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain)              \
  X(CtxSetCurrent, cuCtxSetCurrent)                                \
  X(MemAlloc, cuMemAlloc_v2)                                       \
  X(MemFree, cuMemFree_v2)                                         \
  X(MemHostRegister, cuMemHostRegister_v2)                         \
  X(MemHostUnregister, cuMemHostUnregister)                        \
  X(MemHostAlloc, cuMemHostAlloc)                                  \
  X(MemFreeHost, cuMemFreeHost)                                    \
  X(CtxGetStreamPriorityRange, cuCtxGetStreamPriorityRange)        \
  X(StreamCreateWithPriority, cuStreamCreateWithPriority)          \
  X(StreamDestroy, cuStreamDestroy_v2)                             \
  X(StreamSynchronize, cuStreamSynchronize)                        \
  X(StreamWaitEvent, cuStreamWaitEvent)                            \
  X(EventCreate, cuEventCreate)                                    \
  X(EventDestroy, cuEventDestroy_v2)                               \
  X(EventRecord, cuEventRecord)                                    \
  X(EventQuery, cuEventQuery)                                      \
  X(EventSynchronize, cuEventSynchronize)                          \
  X(MemcpyHtoDAsync, cuMemcpyHtoDAsync_v2)                         \
  X(MemcpyDtoHAsync, cuMemcpyDtoHAsync_v2)                         \
  X(MemcpyDtoDAsync, cuMemcpyDtoDAsync_v2)                         \
  X(LaunchHostFunc, cuLaunchHostFunc)

struct Api {
#define STREAM_FIELD(field, symbol) decltype(&::symbol) field = nullptr;
  STREAM_ENTRY_POINTS(STREAM_FIELD)
#undef STREAM_FIELD
};

constexpr const char* kEnvironment[] = {
    "MEMD_FAKE_CUDA_DEVICES",   "MEMD_FAKE_CUDA_MEMORY",          "MEMD_FAKE_CUDA_VMM",
    "MEMD_FAKE_CUDA_INIT_ERROR", "CUDA_VISIBLE_DEVICES",          "MEMD_FAKE_CUDA_LINK_GBPS",
    "MEMD_FAKE_CUDA_COPY_LATENCY_US", "MEMD_FAKE_CUDA_POISON",   "MEMD_FAKE_CUDA_FAULTS"};

constexpr unsigned char kPoison = 0xa5;

std::vector<unsigned char> Pattern(size_t size, unsigned seed) {
  std::vector<unsigned char> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<unsigned char>((i * 31 + seed) & 0xff);
  return bytes;
}

const unsigned char* Bytes(CUdeviceptr address) {
  return reinterpret_cast<const unsigned char*>(static_cast<uintptr_t>(address));
}

bool AllPoison(const unsigned char* bytes, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    if (bytes[i] != kPoison) return false;
  }
  return true;
}

double Seconds(std::chrono::steady_clock::duration duration) {
  return std::chrono::duration<double>(duration).count();
}

class FakeCudaStreamsTest : public ::testing::Test {
 protected:
  void SetUp() override { Clear(); }
  void TearDown() override {
    Unload();
    Clear();
  }

  static void Clear() {
    for (const char* name : kEnvironment) unsetenv(name);
  }

  // Loads a fresh fake (it reads the environment at cuInit), initialises it
  // and makes device 0's primary context current.
  void Start() {
    library_ = dlopen(MEMD_FAKE_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(library_, nullptr) << dlerror();
#define STREAM_RESOLVE(field, symbol)                                        \
  cu.field = reinterpret_cast<decltype(cu.field)>(dlsym(library_, #symbol)); \
  ASSERT_NE(cu.field, nullptr) << "no " #symbol;
    STREAM_ENTRY_POINTS(STREAM_RESOLVE)
#undef STREAM_RESOLVE
    ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
    ASSERT_EQ(cu.DevicePrimaryCtxRetain(&context_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cu.CtxSetCurrent(context_), CUDA_SUCCESS);
  }

  // Unloading stops the engines and drops whatever they still held (hung
  // copies included): it must return, and the library must go away.
  void Unload() {
    if (library_ == nullptr) return;
    cu.CtxSetCurrent(nullptr);
    ASSERT_EQ(dlclose(library_), 0) << dlerror();
    library_ = nullptr;
    void* still = dlopen(MEMD_FAKE_CUDA_PATH, RTLD_NOW | RTLD_NOLOAD);
    EXPECT_EQ(still, nullptr) << "the fake CUDA library stayed loaded after dlclose";
    if (still != nullptr) dlclose(still);
  }

  CUstream Stream(unsigned int flags = CU_STREAM_NON_BLOCKING) {
    CUstream stream = nullptr;
    EXPECT_EQ(cu.StreamCreateWithPriority(&stream, flags, 0), CUDA_SUCCESS);
    return stream;
  }

  CUevent Event() {
    CUevent event = nullptr;
    EXPECT_EQ(cu.EventCreate(&event, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    return event;
  }

  CUdeviceptr Device(size_t bytes) {
    CUdeviceptr address = 0;
    EXPECT_EQ(cu.MemAlloc(&address, bytes), CUDA_SUCCESS);
    return address;
  }

  // Pinned host memory (cuMemHostAlloc) holding `bytes`.
  unsigned char* Pinned(const std::vector<unsigned char>& bytes) {
    void* memory = nullptr;
    EXPECT_EQ(cu.MemHostAlloc(&memory, bytes.size(), CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
    if (memory != nullptr) std::memcpy(memory, bytes.data(), bytes.size());
    return static_cast<unsigned char*>(memory);
  }

  Api cu;
  CUcontext context_ = nullptr;

 private:
  void* library_ = nullptr;
};

// ---- Symbols, streams, events ----

TEST_F(FakeCudaStreamsTest, ExportsTheVersionedNamesCudaHMapsTo) {
  ASSERT_NO_FATAL_FAILURE(Start());
  void* library = dlopen(MEMD_FAKE_CUDA_PATH, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(library, nullptr);
  for (const char* unversioned : {"cuStreamDestroy", "cuEventDestroy", "cuMemcpyHtoDAsync",
                                  "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync", "cuStreamCreate"}) {
    EXPECT_EQ(dlsym(library, unversioned), nullptr) << unversioned;
  }
  dlclose(library);
}

TEST_F(FakeCudaStreamsTest, PriorityRangeIsZeroToMinusFiveAndOutOfRangeIsClamped) {
  ASSERT_NO_FATAL_FAILURE(Start());
  int least = 7;
  int greatest = 7;
  ASSERT_EQ(cu.CtxGetStreamPriorityRange(&least, &greatest), CUDA_SUCCESS);
  EXPECT_EQ(least, 0);
  EXPECT_EQ(greatest, -5);
  EXPECT_EQ(cu.CtxGetStreamPriorityRange(nullptr, &greatest), CUDA_SUCCESS);
  for (int priority : {0, -5, 7, -100}) {  // Out of range: clamped silently, as in CUDA.
    CUstream stream = nullptr;
    ASSERT_EQ(cu.StreamCreateWithPriority(&stream, CU_STREAM_NON_BLOCKING, priority),
              CUDA_SUCCESS) << priority;
    EXPECT_EQ(cu.StreamDestroy(stream), CUDA_SUCCESS);
  }
  CUstream stream = nullptr;
  EXPECT_EQ(cu.StreamCreateWithPriority(&stream, 0x4, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.StreamCreateWithPriority(nullptr, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.StreamDestroy(reinterpret_cast<CUstream>(0x1234)), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_EQ(cu.CtxSetCurrent(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cu.StreamCreateWithPriority(&stream, 0, 0), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cu.CtxGetStreamPriorityRange(&least, &greatest), CUDA_ERROR_INVALID_CONTEXT);
}

TEST_F(FakeCudaStreamsTest, EventNeverRecordedIsReachedAndBadFlagsAreRefused) {
  ASSERT_NO_FATAL_FAILURE(Start());
  CUevent event = Event();
  EXPECT_EQ(cu.EventQuery(event), CUDA_SUCCESS);
  EXPECT_EQ(cu.EventSynchronize(event), CUDA_SUCCESS);
  CUevent other = nullptr;
  EXPECT_EQ(cu.EventCreate(&other, 0x40), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.EventCreate(&other, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.EventCreate(&other, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING),
            CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(cu.EventDestroy(event), CUDA_SUCCESS);
  EXPECT_EQ(cu.EventQuery(event), CUDA_ERROR_INVALID_HANDLE);
}

// ---- Copies ----

TEST_F(FakeCudaStreamsTest, CopiesOfEachDirectionLandInStreamOrder) {
  ASSERT_NO_FATAL_FAILURE(Start());
  const size_t size = 3 * kMiB + 5;
  const std::vector<unsigned char> first = Pattern(size, 1);
  const std::vector<unsigned char> second = Pattern(size, 2);
  unsigned char* host_first = Pinned(first);
  unsigned char* host_second = Pinned(second);
  unsigned char* back = Pinned(std::vector<unsigned char>(size, 0));
  const CUdeviceptr device = Device(size);
  const CUdeviceptr copy = Device(size);
  CUstream stream = Stream();
  // Two writes of one range: the later one wins. Then device to device, and back.
  ASSERT_EQ(cu.MemcpyHtoDAsync(device, host_first, size, stream), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemcpyHtoDAsync(device, host_second, size, stream), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemcpyDtoDAsync(copy, device, size, stream), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemcpyDtoHAsync(back, copy, size, stream), CUDA_SUCCESS);
  CUevent done = Event();
  ASSERT_EQ(cu.EventRecord(done, stream), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventSynchronize(done), CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(back, second.data(), size), 0);
  EXPECT_EQ(std::memcmp(Bytes(copy), second.data(), size), 0);
  EXPECT_EQ(cu.StreamSynchronize(stream), CUDA_SUCCESS);
  EXPECT_EQ(cu.StreamDestroy(stream), CUDA_SUCCESS);
  EXPECT_EQ(cu.EventDestroy(done), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemFreeHost(host_first), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemFreeHost(host_second), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemFreeHost(back), CUDA_SUCCESS);
}

TEST_F(FakeCudaStreamsTest, BadCopiesAreRefusedAtTheCall) {
  ASSERT_NO_FATAL_FAILURE(Start());
  CUstream stream = Stream();
  const CUdeviceptr device = Device(4096);
  std::vector<unsigned char> host(8192);
  EXPECT_EQ(cu.MemcpyHtoDAsync(device, host.data(), 8192, stream), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemcpyHtoDAsync(device, nullptr, 16, stream), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemcpyDtoHAsync(host.data(), device + 4000, 200, stream), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemcpyDtoDAsync(device, 64, 16, stream), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemcpyHtoDAsync(device, host.data(), 16, reinterpret_cast<CUstream>(0x99)),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cu.MemcpyHtoDAsync(device, host.data(), 0, stream), CUDA_SUCCESS);  // Nothing to do.
  ASSERT_EQ(cu.CtxSetCurrent(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemcpyHtoDAsync(device, host.data(), 16, stream), CUDA_ERROR_INVALID_CONTEXT);
}

TEST_F(FakeCudaStreamsTest, PoisonedDestinationUntilTheCopyLands) {
  setenv("MEMD_FAKE_CUDA_POISON", "1", 1);
  setenv("MEMD_FAKE_CUDA_COPY_LATENCY_US", "1000000", 1);  // 1 s per copy.
  ASSERT_NO_FATAL_FAILURE(Start());
  const size_t size = 64 * 1024;
  const std::vector<unsigned char> data = Pattern(size, 3);
  unsigned char* host = Pinned(data);
  const CUdeviceptr device = Device(size);
  CUstream stream = Stream();
  CUevent done = Event();
  ASSERT_EQ(cu.MemcpyHtoDAsync(device, host, size, stream), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventRecord(done, stream), CUDA_SUCCESS);
  // Asynchronous for real: a second of modelled latency is still ahead.
  EXPECT_EQ(cu.EventQuery(done), CUDA_ERROR_NOT_READY);
  EXPECT_TRUE(AllPoison(Bytes(device), size));
  ASSERT_EQ(cu.EventSynchronize(done), CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(Bytes(device), data.data(), size), 0);
  // Device to host: the host destination reads poison until the event.
  unsigned char* back = Pinned(std::vector<unsigned char>(size, 0));
  ASSERT_EQ(cu.MemcpyDtoHAsync(back, device, size, stream), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventRecord(done, stream), CUDA_SUCCESS);
  EXPECT_EQ(cu.EventQuery(done), CUDA_ERROR_NOT_READY);
  EXPECT_TRUE(AllPoison(back, size));
  ASSERT_EQ(cu.StreamSynchronize(stream), CUDA_SUCCESS);
  EXPECT_EQ(cu.EventQuery(done), CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(back, data.data(), size), 0);
}

TEST_F(FakeCudaStreamsTest, ModelledLinkTimeIsALowerBound) {
  setenv("MEMD_FAKE_CUDA_LINK_GBPS", "1", 1);  // 100 MiB: at least 104.8 ms.
  ASSERT_NO_FATAL_FAILURE(Start());
  const size_t size = 100 * kMiB;
  void* host = nullptr;
  ASSERT_EQ(cu.MemHostAlloc(&host, size, 0), CUDA_SUCCESS);
  const CUdeviceptr device = Device(size);
  CUstream stream = Stream();
  CUevent done = Event();
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(cu.MemcpyHtoDAsync(device, host, size, stream), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventRecord(done, stream), CUDA_SUCCESS);
  EXPECT_EQ(cu.EventQuery(done), CUDA_ERROR_NOT_READY);
  ASSERT_EQ(cu.EventSynchronize(done), CUDA_SUCCESS);
  EXPECT_GE(Seconds(std::chrono::steady_clock::now() - start), size / 1e9);
}

TEST_F(FakeCudaStreamsTest, StreamsShareTheCopyEngineOfADirection) {
  // 32 MiB at 0.5 GB/s: 67 ms each; two on one engine take both in turn.
  setenv("MEMD_FAKE_CUDA_LINK_GBPS", "h2d=0.5", 1);
  ASSERT_NO_FATAL_FAILURE(Start());
  const size_t size = 32 * kMiB;
  void* host = nullptr;
  ASSERT_EQ(cu.MemHostAlloc(&host, size, 0), CUDA_SUCCESS);
  const CUdeviceptr a = Device(size);
  const CUdeviceptr b = Device(size);
  CUstream first = Stream();
  CUstream second = Stream();
  CUevent first_done = Event();
  CUevent second_done = Event();
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(cu.MemcpyHtoDAsync(a, host, size, first), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventRecord(first_done, first), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemcpyHtoDAsync(b, host, size, second), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventRecord(second_done, second), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventSynchronize(second_done), CUDA_SUCCESS);
  // The engine is first come, first served: the first copy was done before.
  EXPECT_EQ(cu.EventQuery(first_done), CUDA_SUCCESS);
  EXPECT_GE(Seconds(std::chrono::steady_clock::now() - start), 2 * size / 0.5e9);
}

TEST_F(FakeCudaStreamsTest, HostToDeviceAndDeviceToHostEnginesAreIndependent) {
  // H2D: 64 MiB at 0.05 GB/s, over a second; D2H instant.
  setenv("MEMD_FAKE_CUDA_LINK_GBPS", "h2d=0.05", 1);
  ASSERT_NO_FATAL_FAILURE(Start());
  const size_t size = 64 * kMiB;
  void* host = nullptr;
  ASSERT_EQ(cu.MemHostAlloc(&host, size, 0), CUDA_SUCCESS);
  const CUdeviceptr device = Device(size);
  CUstream up = Stream();
  CUstream down = Stream();
  CUevent up_done = Event();
  CUevent down_done = Event();
  ASSERT_EQ(cu.MemcpyHtoDAsync(device, host, size, up), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventRecord(up_done, up), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemcpyDtoHAsync(host, device + size - 4096, 4096, down), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventRecord(down_done, down), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventSynchronize(down_done), CUDA_SUCCESS);
  EXPECT_EQ(cu.EventQuery(up_done), CUDA_ERROR_NOT_READY);  // Not behind the upload.
  ASSERT_EQ(cu.EventSynchronize(up_done), CUDA_SUCCESS);
}

TEST_F(FakeCudaStreamsTest, PageableCopiesReturnOnlyOnceDone) {
  setenv("MEMD_FAKE_CUDA_COPY_LATENCY_US", "200000", 1);
  ASSERT_NO_FATAL_FAILURE(Start());
  const size_t size = 64 * 1024;
  std::vector<unsigned char> pageable = Pattern(size, 4);
  const CUdeviceptr device = Device(size);
  CUstream stream = Stream();
  CUevent done = Event();
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(cu.MemcpyHtoDAsync(device, pageable.data(), size, stream), CUDA_SUCCESS);
  EXPECT_GE(Seconds(std::chrono::steady_clock::now() - start), 0.2);
  EXPECT_EQ(std::memcmp(Bytes(device), pageable.data(), size), 0);  // Already there.
  std::vector<unsigned char> back(size, 0);
  ASSERT_EQ(cu.MemcpyDtoHAsync(back.data(), device, size, stream), CUDA_SUCCESS);
  EXPECT_EQ(back, pageable);
  // Registered memory counts as pinned: that copy is asynchronous.
  ASSERT_EQ(cu.MemHostRegister(back.data(), size, 0), CUDA_SUCCESS);
  std::memset(back.data(), 0, size);
  ASSERT_EQ(cu.MemcpyDtoHAsync(back.data(), device, size, stream), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventRecord(done, stream), CUDA_SUCCESS);
  EXPECT_EQ(cu.EventQuery(done), CUDA_ERROR_NOT_READY);
  ASSERT_EQ(cu.EventSynchronize(done), CUDA_SUCCESS);
  EXPECT_EQ(back, pageable);
  EXPECT_EQ(cu.MemHostUnregister(back.data()), CUDA_SUCCESS);
}

// ---- Ordering between streams ----

TEST_F(FakeCudaStreamsTest, StreamWaitEventOrdersAcrossStreams) {
  setenv("MEMD_FAKE_CUDA_COPY_LATENCY_US", "100000", 1);
  ASSERT_NO_FATAL_FAILURE(Start());
  const size_t size = 256 * 1024;
  const std::vector<unsigned char> data = Pattern(size, 5);
  unsigned char* host = Pinned(data);
  const CUdeviceptr staged = Device(size);
  const CUdeviceptr copy = Device(size);
  CUstream producer = Stream();
  CUstream consumer = Stream();
  CUevent produced = Event();
  CUevent consumed = Event();
  ASSERT_EQ(cu.MemcpyHtoDAsync(staged, host, size, producer), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventRecord(produced, producer), CUDA_SUCCESS);
  ASSERT_EQ(cu.StreamWaitEvent(consumer, produced, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemcpyDtoDAsync(copy, staged, size, consumer), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventRecord(consumed, consumer), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventSynchronize(consumed), CUDA_SUCCESS);
  EXPECT_EQ(cu.EventQuery(produced), CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(Bytes(copy), data.data(), size), 0);
  EXPECT_EQ(cu.StreamWaitEvent(consumer, produced, 1), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(FakeCudaStreamsTest, ReRecordingOverwritesTheEvent) {
  setenv("MEMD_FAKE_CUDA_COPY_LATENCY_US", "1000000", 1);
  ASSERT_NO_FATAL_FAILURE(Start());
  unsigned char* host = Pinned(std::vector<unsigned char>(4096, 1));
  const CUdeviceptr device = Device(4096);
  CUstream busy = Stream();
  CUstream idle = Stream();
  CUevent event = Event();
  ASSERT_EQ(cu.MemcpyHtoDAsync(device, host, 4096, busy), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventRecord(event, busy), CUDA_SUCCESS);
  EXPECT_EQ(cu.EventQuery(event), CUDA_ERROR_NOT_READY);
  ASSERT_EQ(cu.EventRecord(event, idle), CUDA_SUCCESS);  // Nothing before it there.
  EXPECT_EQ(cu.EventQuery(event), CUDA_SUCCESS);
}

TEST_F(FakeCudaStreamsTest, NullStreamOrdersWithBlockingStreamsOnly) {
  setenv("MEMD_FAKE_CUDA_COPY_LATENCY_US", "1000000", 1);
  ASSERT_NO_FATAL_FAILURE(Start());
  unsigned char* host = Pinned(std::vector<unsigned char>(4096, 1));
  const CUdeviceptr device = Device(4096);
  CUstream non_blocking = Stream(CU_STREAM_NON_BLOCKING);
  CUevent on_null = Event();
  ASSERT_EQ(cu.MemcpyHtoDAsync(device, host, 4096, non_blocking), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventRecord(on_null, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cu.EventQuery(on_null), CUDA_SUCCESS);  // Not behind the non-blocking copy.

  CUstream blocking = Stream(0);
  CUevent copied = Event();
  ASSERT_EQ(cu.MemcpyHtoDAsync(device, host, 4096, blocking), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventRecord(copied, blocking), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventRecord(on_null, CU_STREAM_LEGACY), CUDA_SUCCESS);
  EXPECT_EQ(cu.EventQuery(on_null), CUDA_ERROR_NOT_READY);  // Behind the blocking copy.
  ASSERT_EQ(cu.EventSynchronize(on_null), CUDA_SUCCESS);
  EXPECT_EQ(cu.EventQuery(copied), CUDA_SUCCESS);
}

TEST_F(FakeCudaStreamsTest, HostFunctionRunsAfterEarlierWorkAndBlocksLaterWork) {
  setenv("MEMD_FAKE_CUDA_COPY_LATENCY_US", "50000", 1);
  ASSERT_NO_FATAL_FAILURE(Start());
  const size_t size = 4096;
  const std::vector<unsigned char> data = Pattern(size, 6);
  unsigned char* host = Pinned(data);
  const CUdeviceptr device = Device(size);
  CUstream stream = Stream();
  struct Call {
    const unsigned char* device;
    const unsigned char* expected;
    std::atomic<bool> saw_bytes{false};
    std::promise<void> entered;
    std::promise<void> release;
    std::shared_future<void> released;
  } call{Bytes(device), data.data(), {false}, {}, {}, {}};
  call.released = call.release.get_future().share();
  ASSERT_EQ(cu.MemcpyHtoDAsync(device, host, size, stream), CUDA_SUCCESS);
  ASSERT_EQ(cu.LaunchHostFunc(
                stream,
                [](void* data) {
                  auto* call = static_cast<Call*>(data);
                  call->saw_bytes = std::memcmp(call->device, call->expected, 4096) == 0;
                  call->entered.set_value();
                  call->released.wait();
                },
                &call),
            CUDA_SUCCESS);
  CUevent after = Event();
  ASSERT_EQ(cu.EventRecord(after, stream), CUDA_SUCCESS);
  call.entered.get_future().wait();
  EXPECT_TRUE(call.saw_bytes);
  EXPECT_EQ(cu.EventQuery(after), CUDA_ERROR_NOT_READY);  // Held by the running function.
  call.release.set_value();
  ASSERT_EQ(cu.EventSynchronize(after), CUDA_SUCCESS);
  EXPECT_EQ(cu.LaunchHostFunc(stream, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(FakeCudaStreamsTest, DestroyReturnsAtOnceAndQueuedWorkStillLands) {
  setenv("MEMD_FAKE_CUDA_COPY_LATENCY_US", "100000", 1);
  ASSERT_NO_FATAL_FAILURE(Start());
  const std::vector<unsigned char> data = Pattern(4096, 7);
  unsigned char* host = Pinned(data);
  const CUdeviceptr device = Device(4096);
  CUstream stream = Stream();
  CUevent done = Event();
  ASSERT_EQ(cu.MemcpyHtoDAsync(device, host, 4096, stream), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventRecord(done, stream), CUDA_SUCCESS);
  ASSERT_EQ(cu.StreamDestroy(stream), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventSynchronize(done), CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(Bytes(device), data.data(), 4096), 0);
}

// ---- Pinned host memory ----

TEST_F(FakeCudaStreamsTest, HostAllocIsPinnedAndFreedOnlyByFreeHost) {
  ASSERT_NO_FATAL_FAILURE(Start());
  void* memory = nullptr;
  ASSERT_EQ(cu.MemHostAlloc(&memory, 10000, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
            CUDA_SUCCESS);
  std::memset(memory, 1, 10000);
  EXPECT_EQ(cu.MemHostUnregister(memory), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  EXPECT_EQ(cu.MemHostRegister(memory, 4096, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  EXPECT_EQ(cu.MemFreeHost(static_cast<char*>(memory) + 4096), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemFreeHost(memory), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemFreeHost(memory), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemHostAlloc(&memory, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemHostAlloc(&memory, 4096, 0x80), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemHostAlloc(nullptr, 4096, 0), CUDA_ERROR_INVALID_VALUE);
}

// ---- Configuration and fault injection ----

TEST_F(FakeCudaStreamsTest, MalformedLinkOrFaultsFailInit) {
  for (const auto& [name, value] : std::vector<std::pair<const char*, const char*>>{
           {"MEMD_FAKE_CUDA_LINK_GBPS", "fast"},
           {"MEMD_FAKE_CUDA_LINK_GBPS", "h2d=1,h2d=2"},
           {"MEMD_FAKE_CUDA_LINK_GBPS", "up=3"},
           {"MEMD_FAKE_CUDA_LINK_GBPS", "-1"},
           {"MEMD_FAKE_CUDA_COPY_LATENCY_US", "1ms"},
           {"MEMD_FAKE_CUDA_POISON", "yes"},
           {"MEMD_FAKE_CUDA_FAULTS", "cuMemcpyHtoDAsync@1=2"},  // Unversioned: not exported.
           {"MEMD_FAKE_CUDA_FAULTS", "cuInit@1=2"},
           {"MEMD_FAKE_CUDA_FAULTS", "event@0=2"},
           {"MEMD_FAKE_CUDA_FAULTS", "event@1=12345"},
           {"MEMD_FAKE_CUDA_FAULTS", "hang@1=2"},
           {"MEMD_FAKE_CUDA_FAULTS", "event@1=2;sticky@1=700"},
       }) {
    Clear();
    setenv(name, value, 1);
    void* library = dlopen(MEMD_FAKE_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(library, nullptr);
    auto init = reinterpret_cast<decltype(&::cuInit)>(dlsym(library, "cuInit"));
    EXPECT_EQ(init(0), CUDA_ERROR_INVALID_VALUE) << name << "=" << value;
    dlclose(library);
  }
}

TEST_F(FakeCudaStreamsTest, CallFaultFailsTheNthCallOnly) {
  setenv("MEMD_FAKE_CUDA_FAULTS", "cuMemcpyHtoDAsync_v2@2=2;cuEventCreate@1=999", 1);
  ASSERT_NO_FATAL_FAILURE(Start());
  CUevent event = nullptr;
  EXPECT_EQ(cu.EventCreate(&event, 0), CUDA_ERROR_UNKNOWN);
  EXPECT_EQ(cu.EventCreate(&event, 0), CUDA_SUCCESS);
  unsigned char* host = Pinned(std::vector<unsigned char>(4096, 1));
  const CUdeviceptr device = Device(4096);
  CUstream stream = Stream();
  EXPECT_EQ(cu.MemcpyHtoDAsync(device, host, 4096, stream), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemcpyHtoDAsync(device, host, 4096, stream), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cu.MemcpyHtoDAsync(device, host, 4096, stream), CUDA_SUCCESS);
  EXPECT_EQ(cu.StreamSynchronize(stream), CUDA_SUCCESS);
}

TEST_F(FakeCudaStreamsTest, EventFaultIsSurfacedOnceByTheNextQuery) {
  setenv("MEMD_FAKE_CUDA_POISON", "1", 1);
  setenv("MEMD_FAKE_CUDA_FAULTS", "event@2=999", 1);
  ASSERT_NO_FATAL_FAILURE(Start());
  const std::vector<unsigned char> data = Pattern(4096, 8);
  unsigned char* host = Pinned(data);
  const CUdeviceptr good = Device(4096);
  const CUdeviceptr bad = Device(4096);
  CUstream stream = Stream();
  CUevent first = Event();
  CUevent second = Event();
  ASSERT_EQ(cu.MemcpyHtoDAsync(good, host, 4096, stream), CUDA_SUCCESS);  // Copy #1.
  ASSERT_EQ(cu.EventRecord(first, stream), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemcpyHtoDAsync(bad, host, 4096, stream), CUDA_SUCCESS);   // Copy #2 fails.
  ASSERT_EQ(cu.EventRecord(second, stream), CUDA_SUCCESS);
  EXPECT_EQ(cu.EventSynchronize(first), CUDA_SUCCESS);  // Before the failure.
  EXPECT_EQ(cu.EventSynchronize(second), CUDA_ERROR_UNKNOWN);
  EXPECT_EQ(cu.EventQuery(second), CUDA_SUCCESS);       // Surfaced once: not sticky.
  EXPECT_EQ(cu.StreamSynchronize(stream), CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(Bytes(good), data.data(), 4096), 0);
  EXPECT_TRUE(AllPoison(Bytes(bad), 4096));             // The failed copy wrote nothing.
  // The stream goes on working.
  ASSERT_EQ(cu.MemcpyHtoDAsync(bad, host, 4096, stream), CUDA_SUCCESS);
  ASSERT_EQ(cu.StreamSynchronize(stream), CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(Bytes(bad), data.data(), 4096), 0);
}

TEST_F(FakeCudaStreamsTest, EventFaultIsSurfacedByStreamSynchronizeWithoutARecord) {
  setenv("MEMD_FAKE_CUDA_FAULTS", "event@1=2", 1);
  ASSERT_NO_FATAL_FAILURE(Start());
  unsigned char* host = Pinned(std::vector<unsigned char>(4096, 1));
  const CUdeviceptr device = Device(4096);
  CUstream stream = Stream();
  ASSERT_EQ(cu.MemcpyHtoDAsync(device, host, 4096, stream), CUDA_SUCCESS);
  EXPECT_EQ(cu.StreamSynchronize(stream), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cu.StreamSynchronize(stream), CUDA_SUCCESS);
}

TEST_F(FakeCudaStreamsTest, StickyFaultBreaksEveryLaterCallOfTheContextUntilReload) {
  setenv("MEMD_FAKE_CUDA_COPY_LATENCY_US", "1000000", 1);
  setenv("MEMD_FAKE_CUDA_FAULTS", "sticky@1=700", 1);
  ASSERT_NO_FATAL_FAILURE(Start());
  unsigned char* host = Pinned(std::vector<unsigned char>(4096, 1));
  const CUdeviceptr device = Device(4096);
  CUstream stream = Stream();
  CUstream other = Stream();
  CUevent done = Event();
  CUevent queued = Event();
  ASSERT_EQ(cu.MemcpyHtoDAsync(device, host, 4096, stream), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventRecord(done, stream), CUDA_SUCCESS);
  // Queued behind on another stream: dropped when the context breaks.
  ASSERT_EQ(cu.StreamWaitEvent(other, done, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemcpyHtoDAsync(device, host, 4096, other), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventRecord(queued, other), CUDA_SUCCESS);
  EXPECT_EQ(cu.EventSynchronize(done), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(cu.EventSynchronize(queued), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(cu.EventQuery(done), CUDA_ERROR_ILLEGAL_ADDRESS);  // Sticky: every time.
  EXPECT_EQ(cu.StreamSynchronize(other), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(cu.MemcpyHtoDAsync(device, host, 4096, stream), CUDA_ERROR_ILLEGAL_ADDRESS);
  CUdeviceptr more = 0;
  EXPECT_EQ(cu.MemAlloc(&more, 4096), CUDA_ERROR_ILLEGAL_ADDRESS);
  CUstream another = nullptr;
  EXPECT_EQ(cu.StreamCreateWithPriority(&another, 0, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(cu.StreamDestroy(stream), CUDA_ERROR_ILLEGAL_ADDRESS);  // Freed all the same.
  EXPECT_EQ(cu.StreamDestroy(stream), CUDA_ERROR_INVALID_HANDLE);
  // A new load of the library is a new process's driver: healthy again.
  Unload();
  Clear();
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_EQ(cu.MemAlloc(&more, 4096), CUDA_SUCCESS);
}

TEST_F(FakeCudaStreamsTest, HungCopyNeverCompletesAndNothingElseHangs) {
  setenv("MEMD_FAKE_CUDA_FAULTS", "hang@1", 1);
  ASSERT_NO_FATAL_FAILURE(Start());
  const std::vector<unsigned char> data = Pattern(4096, 9);
  unsigned char* host = Pinned(data);
  const CUdeviceptr device = Device(4096);
  CUstream stuck = Stream();
  CUstream fine = Stream();
  CUevent never = Event();
  CUevent done = Event();
  ASSERT_EQ(cu.MemcpyHtoDAsync(device, host, 4096, stuck), CUDA_SUCCESS);  // Copy #1 hangs.
  ASSERT_EQ(cu.EventRecord(never, stuck), CUDA_SUCCESS);
  // The engine goes on with other streams' copies.
  ASSERT_EQ(cu.MemcpyHtoDAsync(device, host, 4096, fine), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventRecord(done, fine), CUDA_SUCCESS);
  ASSERT_EQ(cu.EventSynchronize(done), CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(Bytes(device), data.data(), 4096), 0);
  EXPECT_EQ(cu.EventQuery(never), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(cu.EventQuery(never), CUDA_ERROR_NOT_READY);
  // Destroying returns at once; unloading (TearDown) drops the hung copy.
  EXPECT_EQ(cu.EventDestroy(never), CUDA_SUCCESS);
  EXPECT_EQ(cu.StreamDestroy(stuck), CUDA_SUCCESS);
}

}  // namespace
