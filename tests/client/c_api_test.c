/* Every call of memd.h and its error paths, compiled as C99 with -pedantic
 * -Werror against the exported libmemd.so. Run by c_api_runner_test.cc
 * against a daemon on $MEMD_SOCKET_DIR:
 *
 *   memd-c-api-test host       host buffers (every call but device pointers),
 *                              reports, host-to-host copies
 *   memd-c-api-test device     a device:0 buffer, GPU numbering, copies
 *                              to and from it, replicas (daemon on the
 *                              fake CUDA)
 *   memd-c-api-test level_zero a device:0 buffer (daemon on the fake Level Zero)
 *   memd-c-api-test slow_copy  waits that run out, cancel and a copy's own
 *                              deadline (daemon on the fake CUDA, its link
 *                              slowed so that 32 MiB take over a second)
 *
 * Prints "ok - CASE" per case; on the first failed check, prints where and
 * what and exits 1. */
#define _POSIX_C_SOURCE 200809L

#include <cuda.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "memd/memd.h"

static const char* g_case = "";

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "FAIL %s:%d in %s: %s\n", __FILE__, __LINE__, g_case, #cond); \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

/* Runs `call` (which takes &error last), expects `code` and, for an error,
 * a message containing `part`; frees the error. */
#define EXPECT_CODE(code, part, call)                                               \
  do {                                                                              \
    memd_error* error = NULL;                                                       \
    memd_code got = (call);                                                         \
    if (got != (code) || memd_error_code(error) != got ||                           \
        ((code) != MEMD_OK && strstr(memd_error_message(error), (part)) == NULL)) {    \
      fprintf(stderr, "FAIL %s:%d in %s: %s gave %s (%s), expected %s with \"%s\"\n", \
              __FILE__, __LINE__, g_case, #call, memd_code_name(got),                 \
              memd_error_message(error), memd_code_name(code), (part));             \
      exit(1);                                                                      \
    }                                                                               \
    memd_error_free(error);                                                         \
  } while (0)

#define OK(call) EXPECT_CODE(MEMD_OK, "", call)

static void begin(const char* name) { g_case = name; }
static void pass(void) { printf("ok - %s\n", g_case); }

static char g_prefix[64];

/* A name of this run's, so runs never meet: PREFIX/SUFFIX. */
static const char* named(const char* suffix) {
  static char names[8][128];
  static int next = 0;
  char* name = names[next++ % 8];
  snprintf(name, sizeof names[0], "%s/%s", g_prefix, suffix);
  return name;
}

/* named() into the caller's array, for a name used across many calls. */
static void keep(char name[128], const char* suffix) { snprintf(name, 128, "%s", named(suffix)); }

/* The number after the first "key": in `json` (a compact document, so the
 * quotes keep "buffers" from matching "adopted_buffers"). Fails the check
 * when the key is not there. */
static long long json_number(const char* json, const char* key) {
  char pattern[96];
  const char* at;
  snprintf(pattern, sizeof pattern, "\"%s\":", key);
  at = strstr(json, pattern);
  if (at == NULL) {
    fprintf(stderr, "FAIL in %s: no %s in %s\n", g_case, pattern, json);
    exit(1);
  }
  return strtoll(at + strlen(pattern), NULL, 10);
}

/* Whether `json` holds the text printf makes of `format`. */
static int json_has(const char* json, const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof text, format, args);
  va_end(args);
  return strstr(json, text) != NULL;
}

static int64_t now_unix_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* Fetches memd_transfer_progress_json into a caller's array (freeing the
 * library's string), for checks by json_number and json_has. */
static void progress_of(memd_transfer* transfer, char out[1024]) {
  char* json = NULL;
  OK(memd_transfer_progress_json(transfer, &json, &error));
  CHECK(json != NULL && strlen(json) < 1024);
  strcpy(out, json);
  memd_string_free(json);
}

static memd_client* connect_default(void) {
  memd_client* client = NULL;
  OK(memd_connect(NULL, &client, &error));
  CHECK(client != NULL);
  return client;
}

static void versions_and_errors(void) {
  begin("versions and error objects");
  CHECK(MEMD_VERSION_MAJOR(memd_abi_version()) == MEMD_VERSION_MAJOR(MEMD_ABI_VERSION));
  CHECK(MEMD_VERSION_MINOR(memd_abi_version()) >= MEMD_VERSION_MINOR(MEMD_ABI_VERSION));
  CHECK(strcmp(memd_version_string(), MEMD_TEST_VERSION) == 0);
  CHECK(memd_error_code(NULL) == MEMD_OK);
  CHECK(strcmp(memd_error_message(NULL), "") == 0);
  CHECK(strcmp(memd_code_name(MEMD_NOT_FOUND), "NOT_FOUND") == 0);
  CHECK(strcmp(memd_code_name(MEMD_UNAUTHENTICATED), "UNAUTHENTICATED") == 0);
  CHECK(strcmp(memd_code_name((memd_code)17), "UNKNOWN_CODE") == 0);
  CHECK(strcmp(memd_code_name((memd_code)-1), "UNKNOWN_CODE") == 0);
  CHECK(sizeof(memd_code) == 4);
  memd_error_free(NULL);
  pass();
}

static void connect_errors(void) {
  memd_connect_options options;
  memd_client* client = NULL;
  begin("connect: no daemon, bad options, NULL output");
  memd_connect_options_init(&options);
  CHECK(options.struct_size == sizeof options && options.call_timeout_ms == 30000 &&
        options.daemon_uid == -1 && options.socket_dir == NULL);
  options.socket_dir = "/nonexistent/memd-c-api-test";
  EXPECT_CODE(MEMD_UNAVAILABLE, "/nonexistent/memd-c-api-test",
              memd_connect(&options, &client, &error));
  CHECK(client == NULL);
  /* Without an error object the code still comes back. */
  CHECK(memd_connect(&options, &client, NULL) == MEMD_UNAVAILABLE);

  memd_connect_options_init(&options);
  options.call_timeout_ms = -5;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "call_timeout_ms is -5", memd_connect(&options, &client, &error));
  options.call_timeout_ms = 1000;
  options.daemon_uid = -7;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "daemon_uid is -7", memd_connect(&options, &client, &error));
  memd_connect_options_init(&options);
  options.struct_size = sizeof options + 8; /* A newer memd.h than this library. */
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "struct_size", memd_connect(&options, &client, &error));
  options.struct_size = 2;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "struct_size is 2", memd_connect(&options, &client, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "client is NULL", memd_connect(NULL, NULL, &error));
  CHECK(client == NULL);
  memd_client_close(NULL);
  pass();
}

static void fill(unsigned char* data, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) data[i] = (unsigned char)(i * 7 + 3);
}

static int filled(const unsigned char* data, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) {
    if (data[i] != (unsigned char)(i * 7 + 3)) return 0;
  }
  return 1;
}

static void create_write_seal_open(memd_client* client) {
  memd_attr attrs[2];
  memd_create_options create;
  memd_open_options open;
  memd_buffer* writer = NULL;
  memd_buffer* reader = NULL;
  const memd_buffer_info* info;
  char name[128];
  keep(name, "frame");

  begin("create with attributes, write, seal, open read-only");
  attrs[0].key = "shape";
  attrs[0].value = "64,64";
  attrs[1].key = "dtype";
  attrs[1].value = "uint8";
  memd_create_options_init(&create);
  CHECK(create.mode == 0600 && create.existing_owner == -1 && create.location == NULL);
  create.attrs = attrs;
  create.attr_count = 2;
  create.mode = 0640;
  OK(memd_create(client, name, 4096, &create, &writer, &error));
  CHECK(memd_buffer_writable(writer));
  CHECK(memd_buffer_size(writer) == 4096);
  CHECK(memd_buffer_device(writer) == -1 && memd_buffer_device_pointer(writer) == 0);
  CHECK(memd_buffer_device_type(writer) == kDLCPU && memd_buffer_device_type(NULL) == 0);
  CHECK(memd_buffer_mutable_data(writer) != NULL);
  CHECK(memd_buffer_data(writer) == memd_buffer_mutable_data(writer));
  fill(memd_buffer_mutable_data(writer), 4096);

  info = memd_buffer_get_info(writer);
  CHECK(info->struct_size == sizeof(memd_buffer_info));
  CHECK(strcmp(info->name, name) == 0 && strcmp(info->location, "host") == 0);
  CHECK(info->size == 4096 && info->mode == 0640 && !info->sealed && !info->ephemeral);
  CHECK(info->owner_uid == (uint32_t)geteuid() && info->creator_pid == (int32_t)getpid());
  CHECK(info->created_unix_ns > 0 && info->sealed_unix_ns == 0 && info->id != 0);
  CHECK(info->attr_count == 2); /* Sorted by key. */
  CHECK(strcmp(info->attrs[0].key, "dtype") == 0 && strcmp(info->attrs[0].value, "uint8") == 0);
  CHECK(strcmp(info->attrs[1].key, "shape") == 0 && strcmp(info->attrs[1].value, "64,64") == 0);
  CHECK(strcmp(memd_buffer_attr(writer, "shape"), "64,64") == 0);
  CHECK(memd_buffer_attr(writer, "layout") == NULL && memd_buffer_attr(writer, NULL) == NULL);

  OK(memd_buffer_seal(writer, &error));
  info = memd_buffer_get_info(writer); /* Rebuilt by the seal. */
  CHECK(info->sealed && info->sealed_unix_ns >= info->created_unix_ns);
  EXPECT_CODE(MEMD_FAILED_PRECONDITION, "sealed", memd_buffer_seal(writer, &error));

  memd_open_options_init(&open);
  CHECK(open.owner == -1 && open.wait_ms == 0 && !open.writable);
  open.owner = geteuid();
  OK(memd_open(client, name, &open, &reader, &error));
  CHECK(!memd_buffer_writable(reader) && memd_buffer_mutable_data(reader) == NULL);
  CHECK(memd_buffer_data(reader) != NULL && filled(memd_buffer_data(reader), 4096));
  CHECK(strcmp(memd_buffer_attr(reader, "dtype"), "uint8") == 0);
  CHECK(memd_buffer_get_info(reader)->lease_count == 2);
  EXPECT_CODE(MEMD_FAILED_PRECONDITION, "", memd_buffer_seal(reader, &error));
  OK(memd_buffer_release(reader, &error));
  OK(memd_buffer_release(writer, &error));
  OK(memd_buffer_release(NULL, &error));
  pass();
}

static void write_from_file(memd_client* client) {
  memd_create_options create;
  memd_buffer* writer = NULL;
  memd_buffer* plain = NULL;
  unsigned char bytes[8192];
  char path[] = "/tmp/memd-c-api-test-XXXXXX";
  char name[128];
  int fd;
  int pipe_ends[2];
  keep(name, "from-file");

  begin("a file into a host buffer through its kept descriptor");
  fill(bytes, sizeof bytes);
  fd = mkstemp(path);
  CHECK(fd >= 0 && write(fd, bytes, sizeof bytes) == (ssize_t)sizeof bytes);
  unlink(path);
  memd_create_options_init(&create);
  CHECK(create.keep_descriptor == 0);
  create.keep_descriptor = 1;
  OK(memd_create(client, name, sizeof bytes, &create, &writer, &error));
  OK(memd_buffer_write_from_file(writer, fd, 0, 4096, 0, 0, &error));
  OK(memd_buffer_write_from_file(writer, fd, 4096, 4096, 4096, 2, &error));
  CHECK(filled(memd_buffer_data(writer), sizeof bytes));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "run past the end",
              memd_buffer_write_from_file(writer, fd, 0, 4096, 4097, 0, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "threads is -1",
              memd_buffer_write_from_file(writer, fd, 0, 16, 0, -1, &error));
  EXPECT_CODE(MEMD_OUT_OF_RANGE, "the file ended",
              memd_buffer_write_from_file(writer, fd, 4096, 8192, 0, 0, &error));
  CHECK(pipe(pipe_ends) == 0);
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "sendfile",
              memd_buffer_write_from_file(writer, pipe_ends[0], 0, 16, 0, 0, &error));
  close(pipe_ends[0]);
  close(pipe_ends[1]);
  OK(memd_buffer_seal(writer, &error));
  EXPECT_CODE(MEMD_FAILED_PRECONDITION, "sealed",
              memd_buffer_write_from_file(writer, fd, 0, 16, 0, 0, &error));
  memd_create_options_init(&create);
  OK(memd_create(client, named("from-file-plain"), 16, &create, &plain, &error));
  EXPECT_CODE(MEMD_FAILED_PRECONDITION, "keep_descriptor",
              memd_buffer_write_from_file(plain, fd, 0, 16, 0, 0, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "",
              memd_buffer_write_from_file(NULL, fd, 0, 16, 0, 0, &error));
  OK(memd_buffer_release(plain, &error));
  OK(memd_buffer_release(writer, &error));
  close(fd);
  pass();
}

static void open_and_create_errors(memd_client* client) {
  memd_create_options create;
  memd_open_options open;
  memd_attr attrs[17];
  memd_buffer* held = NULL;
  memd_buffer* buffer = NULL; /* Failed calls must leave it NULL. */
  char name[128];
  keep(name, "errors");
  int i;

  begin("create and open errors carry the code and the numbers");
  OK(memd_create(client, name, 100, NULL, &held, &error));
  EXPECT_CODE(MEMD_ALREADY_EXISTS, name, memd_create(client, name, 100, NULL, &buffer, &error));
  EXPECT_CODE(MEMD_NOT_FOUND, named("missing"), memd_open(client, named("missing"), NULL, &buffer, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "", memd_create(client, "", 100, NULL, &buffer, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "name is NULL", memd_create(client, NULL, 100, NULL, &buffer, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "client is NULL", memd_open(NULL, name, NULL, &buffer, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "buffer is NULL", memd_open(client, name, NULL, NULL, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "size", memd_create(client, named("zero"), 0, NULL, &buffer, &error));

  memd_create_options_init(&create);
  create.location = "device:7";
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "device:7", memd_create(client, named("gpu"), 100, &create, &buffer, &error));
  memd_create_options_init(&create);
  create.mode = 01777;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "mode", memd_create(client, named("mode"), 100, &create, &buffer, &error));

  for (i = 0; i < 17; ++i) {
    attrs[i].key = "k";
    attrs[i].value = "v";
  }
  memd_create_options_init(&create);
  create.attrs = attrs;
  create.attr_count = 17;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "attr_count is 17; a buffer carries at most 16",
              memd_create(client, named("attrs"), 100, &create, &buffer, &error));
  create.attr_count = 2; /* "k" twice */
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "given twice", memd_create(client, named("attrs"), 100, &create, &buffer, &error));
  attrs[0].key = "bad key";
  create.attr_count = 1;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "bad key", memd_create(client, named("attrs"), 100, &create, &buffer, &error));
  attrs[0].key = NULL;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "attrs[0] has a NULL key", memd_create(client, named("attrs"), 100, &create, &buffer, &error));
  create.attrs = NULL;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "attrs is NULL", memd_create(client, named("attrs"), 100, &create, &buffer, &error));

  memd_open_options_init(&open);
  open.wait_ms = 50; /* Nobody seals it. */
  EXPECT_CODE(MEMD_DEADLINE_EXCEEDED, "", memd_open(client, name, &open, &buffer, &error));
  open.wait_ms = -1;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "wait_ms is -1", memd_open(client, name, &open, &buffer, &error));
  memd_open_options_init(&open);
  open.owner = (int64_t)geteuid() + 1;
  EXPECT_CODE(MEMD_PERMISSION_DENIED, "", memd_open(client, name, &open, &buffer, &error));
  EXPECT_CODE(MEMD_NOT_FOUND, "", memd_unlink(client, named("missing"), &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "name is NULL", memd_unlink(client, NULL, &error));
  OK(memd_unlink(client, name, &error));
  CHECK(buffer == NULL);
  OK(memd_buffer_release(held, &error));
  pass();
}

static void older_and_newer_option_structs(memd_client* client) {
  memd_open_options open;
  memd_buffer* writer = NULL;
  memd_buffer* joined = NULL;
  char name[128];
  keep(name, "sizes");

  begin("an older, shorter options struct takes defaults for the rest");
  OK(memd_create(client, name, 64, NULL, &writer, &error));
  /* A caller that knows only `writable`: wait_ms, populate and owner are
   * garbage past its struct_size and must not be read. */
  memset(&open, 0x7f, sizeof open);
  open.struct_size = offsetof(memd_open_options, writable) + sizeof open.writable;
  open.writable = 1;
  OK(memd_open(client, name, &open, &joined, &error));
  CHECK(memd_buffer_writable(joined));
  OK(memd_buffer_release(joined, &error));
  memd_open_options_init(&open);
  open.struct_size = sizeof open + 1;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "newer memd.h", memd_open(client, name, &open, &joined, &error));
  /* Released before anyone sealed it: the daemon removes it. */
  OK(memd_buffer_release(writer, &error));
  EXPECT_CODE(MEMD_NOT_FOUND, name, memd_unlink(client, name, &error));
  pass();
}

static void location_auto(memd_client* client) {
  memd_create_options create;
  memd_buffer* buffer = NULL;
  memd_buffer* refused = NULL;
  char* json = NULL;
  const char* only_host[] = {"host"};
  const char* bogus[] = {"host", "device:x"};
  const char* null_entry[] = {"host", NULL};
  char name[128];
  keep(name, "auto");

  begin("location auto takes a hint and says which rule chose");
  memd_create_options_init(&create);
  create.location = "auto";
  create.access_hint = "read_mostly";
  create.mappable_locations = only_host;
  create.mappable_location_count = 1;
  OK(memd_create(client, name, 100, &create, &buffer, &error));
  CHECK(strcmp(memd_buffer_get_info(buffer)->location, "host") == 0);
  CHECK(strncmp(memd_buffer_placement(buffer), "100 B with hint read_mostly: ", 29) == 0);
  CHECK(strstr(memd_buffer_placement(buffer), "so host") != NULL);
  CHECK(memd_buffer_placement(NULL) == NULL);
  OK(memd_stat_json(client, name, &json, &error));
  CHECK(json_has(json, "\"placement\":\"100 B with hint read_mostly"));
  memd_string_free(json);
  OK(memd_buffer_release(buffer, &error));

  create.access_hint = "gpu_please";
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "unknown access hint 'gpu_please'",
              memd_create(client, named("auto-bad"), 100, &create, &refused, &error));
  create.access_hint = NULL;
  create.mappable_locations = bogus;
  create.mappable_location_count = 2;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "mappable location 'device:x'",
              memd_create(client, named("auto-bad"), 100, &create, &refused, &error));
  create.mappable_locations = null_entry;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "mappable_locations[1] is NULL",
              memd_create(client, named("auto-bad"), 100, &create, &refused, &error));
  create.mappable_location_count = 65;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "mappable_location_count is 65; the limit is 64",
              memd_create(client, named("auto-bad"), 100, &create, &refused, &error));
  memd_create_options_init(&create);
  create.access_hint = "streaming"; /* Without auto. */
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "go with location auto",
              memd_create(client, named("auto-bad"), 100, &create, &refused, &error));
  EXPECT_CODE(MEMD_NOT_FOUND, "", memd_stat_json(client, named("auto-bad"), &json, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "name is NULL", memd_stat_json(client, NULL, &json, &error));
  CHECK(refused == NULL);
  pass();

  begin("numa is sent, shown and checked");
  memd_create_options_init(&create);
  CHECK(create.numa == NULL);
  OK(memd_create(client, named("numa-default"), 100, &create, &buffer, &error));
  CHECK(memd_buffer_numa_node(buffer) == -1);
  OK(memd_buffer_release(buffer, &error));
  create.numa = "0"; /* This machine's one node: bound, harmlessly. */
  OK(memd_create(client, named("numa-zero"), 100, &create, &buffer, &error));
  CHECK(memd_buffer_numa_node(buffer) == 0);
  CHECK(memd_buffer_numa_node(NULL) == -1);
  OK(memd_stat_json(client, named("numa-zero"), &json, &error));
  CHECK(json_has(json, "\"numa_node\":0"));
  memd_string_free(json);
  OK(memd_buffer_release(buffer, &error));
  create.numa = "-1";
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "auto, off or a node number",
              memd_create(client, named("numa-bad"), 100, &create, &refused, &error));
  create.numa = "1000";
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "NUMA node 1000 does not exist",
              memd_create(client, named("numa-bad"), 100, &create, &refused, &error));
  CHECK(refused == NULL);
  pass();

  begin("retention is sent, shown and checked");
  memd_create_options_init(&create);
  CHECK(create.retention == NULL);
  OK(memd_create(client, named("pinned-by-default"), 100, &create, &buffer, &error));
  CHECK(strcmp(memd_buffer_retention(buffer), "pinned") == 0);
  OK(memd_buffer_release(buffer, &error));
  create.retention = "evictable";
  OK(memd_create(client, name, 100, &create, &buffer, &error));
  CHECK(strcmp(memd_buffer_retention(buffer), "evictable") == 0);
  CHECK(memd_buffer_retention(NULL) == NULL);
  OK(memd_stat_json(client, name, &json, &error));
  CHECK(json_has(json, "\"retention\":\"evictable\""));
  memd_string_free(json);
  /* The listing as JSON carries what memd_buffer_info lacks. */
  OK(memd_list_json(client, name, &json, &error));
  CHECK(json[0] == '[');
  CHECK(json_has(json, "\"retention\":\"evictable\""));
  memd_string_free(json);
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "json is NULL", memd_list_json(client, name, NULL, &error));
  /* Unlinked while leased: listed only with MEMD_LIST_UNLINKED. */
  OK(memd_unlink(client, name, &error));
  OK(memd_list_json(client, name, &json, &error));
  CHECK(strcmp(json, "[]") == 0);
  memd_string_free(json);
  OK(memd_list_json_flags(client, name, MEMD_LIST_UNLINKED, &json, &error));
  CHECK(json_has(json, "\"unlinked\":true"));
  CHECK(json_has(json, "\"retention\":\"evictable\""));
  memd_string_free(json);
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "unknown list flags 0x6",
              memd_list_json_flags(client, name, 7, &json, &error));
  OK(memd_buffer_release(buffer, &error));
  create.retention = "forever";
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "unknown retention 'forever'",
              memd_create(client, named("retention-bad"), 100, &create, &refused, &error));
  create.retention = NULL;
  create.wait_for_memory_ms = -1;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "wait_for_memory_ms",
              memd_create(client, named("retention-bad"), 100, &create, &refused, &error));
  create.wait_for_memory_ms = 1000; /* Room now: created at once. */
  OK(memd_create(client, named("waits-for-nothing"), 100, &create, &buffer, &error));
  OK(memd_buffer_release(buffer, &error));
  OK(memd_open_or_create(client, named("either-waits-for-nothing"), 100, &create, 0, &buffer,
                         &error));
  CHECK(memd_buffer_created(buffer));
  OK(memd_buffer_release(buffer, &error));
  CHECK(refused == NULL);
  pass();
}

static void open_or_create_stat_list(memd_client* client) {
  memd_buffer* first = NULL;
  memd_buffer* second = NULL;
  memd_buffer* other = NULL;
  memd_buffer_info* info = NULL;
  memd_buffer_list* list = NULL;
  memd_create_options create;
  char name[128];
  keep(name, "list/b");

  begin("open_or_create, stat, list");
  memd_create_options_init(&create);
  create.ephemeral = 1;
  OK(memd_open_or_create(client, name, 256, &create, 0, &first, &error));
  CHECK(memd_buffer_created(first) && memd_buffer_writable(first));
  OK(memd_buffer_seal(first, &error));
  OK(memd_open_or_create(client, name, 256, &create, 1000, &second, &error));
  CHECK(!memd_buffer_created(second) && !memd_buffer_writable(second));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "wait_ms is -3",
              memd_open_or_create(client, name, 256, &create, -3, &second, &error));
  OK(memd_create(client, named("list/a"), 128, NULL, &other, &error));

  OK(memd_stat(client, name, &info, &error));
  CHECK(strcmp(info->name, name) == 0 && info->size == 256 && info->sealed && info->ephemeral);
  CHECK(info->lease_count == 2 && info->attr_count == 0);
  memd_buffer_info_free(info);
  EXPECT_CODE(MEMD_NOT_FOUND, "", memd_stat(client, named("list/none"), &info, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "info is NULL", memd_stat(client, name, NULL, &error));

  OK(memd_list(client, named("list/"), &list, &error));
  CHECK(list->count == 2);
  CHECK(strcmp(list->items[0].name, named("list/a")) == 0 && list->items[0].size == 128);
  CHECK(strcmp(list->items[1].name, name) == 0 && list->items[1].sealed);
  memd_buffer_list_free(list);
  OK(memd_list(client, NULL, &list, &error));
  CHECK(list->count >= 2);
  memd_buffer_list_free(list);
  OK(memd_list(client, named("nothing-here/"), &list, &error));
  CHECK(list->count == 0);
  memd_buffer_list_free(list);
  memd_buffer_list_free(NULL);
  memd_buffer_info_free(NULL);

  OK(memd_buffer_release(second, &error));
  OK(memd_buffer_release(first, &error)); /* Ephemeral: gone with its last lease. */
  EXPECT_CODE(MEMD_NOT_FOUND, "", memd_stat(client, name, &info, &error));
  OK(memd_buffer_release(other, &error)); /* Never sealed: removed. */
  EXPECT_CODE(MEMD_NOT_FOUND, "", memd_stat(client, named("list/a"), &info, &error));
  pass();
}

static void dlpack_host(memd_client* client) {
  memd_buffer* writer = NULL;
  memd_buffer* reader = NULL;
  memd_buffer_info* info = NULL;
  memd_dlpack_options options;
  DLManagedTensor* tensor = NULL;
  DLManagedTensor* kept = NULL;
  int64_t shape[2] = {16, 4};
  char name[128];
  keep(name, "dlpack");

  begin("DLPack export of host memory, and the tensor holds the lease");
  OK(memd_create(client, name, 256, NULL, &writer, &error));
  fill(memd_buffer_mutable_data(writer), 256);
  OK(memd_buffer_to_dlpack(writer, NULL, &tensor, &error));
  CHECK(tensor->dl_tensor.device.device_type == kDLCPU && tensor->dl_tensor.device.device_id == 0);
  CHECK(tensor->dl_tensor.data == memd_buffer_mutable_data(writer));
  CHECK(tensor->dl_tensor.ndim == 1 && tensor->dl_tensor.shape[0] == 256);
  CHECK(tensor->dl_tensor.dtype.code == kDLUInt && tensor->dl_tensor.dtype.bits == 8);
  CHECK(tensor->dl_tensor.strides != NULL && tensor->dl_tensor.strides[0] == 1);
  CHECK(tensor->dl_tensor.byte_offset == 0);
  tensor->deleter(tensor);

  memd_dlpack_options_init(&options);
  options.dtype.code = kDLFloat;
  options.dtype.bits = 32;
  options.ndim = 2;
  options.shape = shape;
  OK(memd_buffer_to_dlpack(writer, &options, &kept, &error));
  shape[0] = 99; /* Copied: the tensor keeps 16. */
  CHECK(kept->dl_tensor.ndim == 2 && kept->dl_tensor.shape[0] == 16 && kept->dl_tensor.shape[1] == 4);
  CHECK(kept->dl_tensor.strides[0] == 4 && kept->dl_tensor.strides[1] == 1);
  shape[0] = 17; /* 17 * 4 * 4 bytes > 256 */
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "more than 64 elements of 4 bytes",
              memd_buffer_to_dlpack(writer, &options, &tensor, &error));
  shape[0] = INT64_MAX; /* No overflow into a small product. */
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "the buffer has 256 bytes",
              memd_buffer_to_dlpack(writer, &options, &tensor, &error));
  shape[0] = -1;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "shape[0] is -1", memd_buffer_to_dlpack(writer, &options, &tensor, &error));
  options.ndim = 33;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "ndim is 33", memd_buffer_to_dlpack(writer, &options, &tensor, &error));
  options.ndim = 2;
  options.shape = NULL;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "shape is NULL", memd_buffer_to_dlpack(writer, &options, &tensor, &error));
  memd_dlpack_options_init(&options);
  options.dtype.bits = 12;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "12 bits", memd_buffer_to_dlpack(writer, &options, &tensor, &error));

  /* Released with a live tensor: the memory and the lease stay. */
  OK(memd_buffer_seal(writer, &error));
  OK(memd_buffer_release(writer, &error));
  OK(memd_stat(client, name, &info, &error));
  CHECK(info->lease_count == 1);
  memd_buffer_info_free(info);
  CHECK(filled(kept->dl_tensor.data, 256));
  kept->deleter(kept);
  OK(memd_stat(client, name, &info, &error));
  CHECK(info->lease_count == 0);
  memd_buffer_info_free(info);

  begin("DLPack of a read-only lease only when the caller allows it");
  OK(memd_open(client, name, NULL, &reader, &error));
  EXPECT_CODE(MEMD_FAILED_PRECONDITION, "allow_read_only", memd_buffer_to_dlpack(reader, NULL, &tensor, &error));
  memd_dlpack_options_init(&options);
  options.allow_read_only = 1;
  OK(memd_buffer_to_dlpack(reader, &options, &tensor, &error));
  CHECK(tensor->dl_tensor.data == memd_buffer_data(reader));
  tensor->deleter(tensor);
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "tensor is NULL", memd_buffer_to_dlpack(reader, &options, NULL, &error));
  OK(memd_buffer_release(reader, &error));
  OK(memd_unlink(client, name, &error));
  pass();
}

/* What memd_dlpack_options.on_delete saw. */
typedef struct deletes_seen {
  int calls;
  memd_client* client;
  const char* name;
  uint32_t lease_count; /* The buffer's, when the hook ran. */
} deletes_seen;

static void count_deletes(void* context) {
  deletes_seen* seen = (deletes_seen*)context;
  memd_buffer_info* info = NULL;
  ++seen->calls;
  OK(memd_stat(seen->client, seen->name, &info, &error));
  seen->lease_count = info->lease_count;
  memd_buffer_info_free(info);
}

static void dlpack_versioned_and_hook(memd_client* client) {
  memd_buffer* writer = NULL;
  memd_buffer* reader = NULL;
  memd_buffer_info* info = NULL;
  memd_dlpack_options options;
  DLManagedTensor* tensor = NULL;
  memd_DLManagedTensorVersioned* versioned = NULL;
  int64_t shape[2] = {8, 4};
  deletes_seen deletes = {0, NULL, NULL, 99};
  char name[128];
  keep(name, "dlpackv");
  deletes.client = client;
  deletes.name = name;

  begin("DLPack 1.0: a read-only lease exports marked read-only");
  OK(memd_create(client, name, 128, NULL, &writer, &error));
  fill(memd_buffer_mutable_data(writer), 128);
  OK(memd_buffer_to_dlpack_versioned(writer, NULL, &versioned, &error));
  CHECK(versioned->version.major == 1 && versioned->version.minor == 0);
  CHECK(versioned->flags == 0); /* A writable lease. */
  versioned->deleter(versioned);
  memd_dlpack_options_init(&options);
  options.read_only = 1; /* The caller's own promise: read-only from a writer. */
  OK(memd_buffer_to_dlpack_versioned(writer, &options, &versioned, &error));
  CHECK(versioned->flags & DLPACK_FLAG_BITMASK_READ_ONLY);
  versioned->deleter(versioned);
  EXPECT_CODE(MEMD_FAILED_PRECONDITION, "read_only is set",
              memd_buffer_to_dlpack(writer, &options, &tensor, &error));
  OK(memd_buffer_seal(writer, &error));
  OK(memd_buffer_release(writer, &error));
  OK(memd_open(client, name, NULL, &reader, &error));
  memd_dlpack_options_init(&options);
  options.dtype.code = kDLFloat;
  options.dtype.bits = 32;
  options.ndim = 2;
  options.shape = shape;
  OK(memd_buffer_to_dlpack_versioned(reader, &options, &versioned, &error));
  CHECK(versioned->flags == DLPACK_FLAG_BITMASK_READ_ONLY);
  CHECK(versioned->dl_tensor.data == memd_buffer_data(reader));
  CHECK(versioned->dl_tensor.device.device_type == kDLCPU && versioned->dl_tensor.device.device_id == 0);
  CHECK(versioned->dl_tensor.ndim == 2 && versioned->dl_tensor.shape[0] == 8 &&
        versioned->dl_tensor.shape[1] == 4);
  CHECK(versioned->dl_tensor.strides[0] == 4 && versioned->dl_tensor.strides[1] == 1);
  CHECK(versioned->dl_tensor.dtype.code == kDLFloat && versioned->dl_tensor.dtype.bits == 32 &&
        versioned->dl_tensor.dtype.lanes == 1);
  CHECK(filled(versioned->dl_tensor.data, 128));
  versioned->deleter(versioned);
  /* The checks are the 0.6 export's. */
  shape[0] = 9;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "more than 32 elements of 4 bytes",
              memd_buffer_to_dlpack_versioned(reader, &options, &versioned, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "tensor is NULL",
              memd_buffer_to_dlpack_versioned(reader, &options, NULL, &error));
  memd_dlpack_options_init(&options);
  options.scalar = 1; /* Zero dimensions: one element. */
  OK(memd_buffer_to_dlpack_versioned(reader, &options, &versioned, &error));
  CHECK(versioned->dl_tensor.ndim == 0);
  versioned->deleter(versioned);
  pass();

  begin("DLPack: the deleter calls on_delete once, after letting go of the lease; a failed export never");
  memd_dlpack_options_init(&options);
  options.on_delete = count_deletes;
  options.on_delete_context = &deletes;
  options.allow_read_only = 1;
  OK(memd_buffer_to_dlpack(reader, &options, &tensor, &error));
  OK(memd_buffer_to_dlpack_versioned(reader, &options, &versioned, &error));
  OK(memd_buffer_release(reader, &error));
  CHECK(deletes.calls == 0);
  tensor->deleter(tensor);
  CHECK(deletes.calls == 1 && deletes.lease_count == 1); /* The versioned tensor holds it. */
  versioned->deleter(versioned);
  CHECK(deletes.calls == 2 && deletes.lease_count == 0); /* The hook ran after the lease ended. */
  OK(memd_stat(client, name, &info, &error));
  CHECK(info->lease_count == 0);
  memd_buffer_info_free(info);
  OK(memd_open(client, name, NULL, &reader, &error));
  options.dtype.bits = 12;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "12 bits",
              memd_buffer_to_dlpack_versioned(reader, &options, &versioned, &error));
  options.dtype.bits = 8;
  options.allow_read_only = 0;
  EXPECT_CODE(MEMD_FAILED_PRECONDITION, "allow_read_only",
              memd_buffer_to_dlpack(reader, &options, &tensor, &error));
  CHECK(deletes.calls == 2);
  pass();

  begin("DLPack: an options struct of before the hook takes the defaults for the rest");
  /* A caller built against the older memd.h: what follows allow_read_only
   * is garbage past its struct_size and must not be read (a garbage hook
   * would be called; read_only would refuse; scalar would drop the
   * dimension). */
  memset(&options, 0x7f, sizeof options);
  options.struct_size = offsetof(memd_dlpack_options, on_delete);
  CHECK(options.struct_size == 32); /* sizeof the old struct, padding included. */
  options.dtype.code = kDLUInt;
  options.dtype.bits = 8;
  options.dtype.lanes = 1;
  options.ndim = 0;
  options.shape = NULL;
  options.allow_read_only = 1;
  OK(memd_buffer_to_dlpack(reader, &options, &tensor, &error));
  CHECK(tensor->dl_tensor.ndim == 1 && tensor->dl_tensor.shape[0] == 128);
  tensor->deleter(tensor);
  OK(memd_buffer_to_dlpack_versioned(reader, &options, &versioned, &error));
  CHECK(versioned->flags == DLPACK_FLAG_BITMASK_READ_ONLY && versioned->dl_tensor.ndim == 1);
  versioned->deleter(versioned);
  OK(memd_buffer_release(reader, &error));
  OK(memd_unlink(client, name, &error));
  pass();
}

static void buffer_outlives_client(void) {
  memd_client* client = connect_default();
  memd_buffer* buffer = NULL;
  char name[128];
  keep(name, "outlives");

  begin("a buffer outlives its client");
  OK(memd_create(client, name, 64, NULL, &buffer, &error));
  fill(memd_buffer_mutable_data(buffer), 64);
  memd_client_close(client);
  CHECK(filled(memd_buffer_data(buffer), 64));
  OK(memd_buffer_seal(buffer, &error));
  OK(memd_buffer_release(buffer, &error));
  client = connect_default();
  OK(memd_unlink(client, name, &error));
  memd_client_close(client);
  pass();
}

static void session_ping_and_lease_ids(memd_client* client) {
  memd_buffer* writer = NULL;
  memd_buffer* joined = NULL;
  memd_open_options open;
  const char* dir = getenv("MEMD_SOCKET_DIR");
  char name[128];
  keep(name, "ids");

  begin("session id, socket directory, ping, lease ids");
  CHECK(memd_client_session_id(client) != 0);
  CHECK(memd_client_session_id(NULL) == 0);
  CHECK(dir != NULL && strcmp(memd_client_socket_dir(client), dir) == 0);
  CHECK(strcmp(memd_client_socket_dir(NULL), "") == 0);
  OK(memd_ping(client, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "client is NULL", memd_ping(NULL, &error));
  OK(memd_create(client, name, 64, NULL, &writer, &error));
  memd_open_options_init(&open);
  open.writable = 1;
  OK(memd_open(client, name, &open, &joined, &error));
  CHECK(memd_buffer_lease_id(writer) != 0 && memd_buffer_lease_id(joined) != 0);
  CHECK(memd_buffer_lease_id(writer) != memd_buffer_lease_id(joined));
  CHECK(memd_buffer_lease_id(NULL) == 0);
  OK(memd_buffer_release(joined, &error));
  OK(memd_buffer_release(writer, &error)); /* Never sealed: removed. */
  pass();
}

/* This uid's bytes and buffers at `location` in a memd_usage_json
 * document; 0 and 0 when it has no entry there. */
static void usage_of(const char* json, const char* location, long long* bytes,
                     long long* buffers) {
  char entry[160];
  const char* at;
  snprintf(entry, sizeof entry, "{\"uid\":%ld,\"location\":\"%s\",", (long)geteuid(), location);
  at = strstr(json, entry);
  *bytes = at == NULL ? 0 : json_number(at, "bytes");
  *buffers = at == NULL ? 0 : json_number(at, "buffers");
}

static void reports_as_json(memd_client* client) {
  char* json = NULL;
  memd_buffer* held = NULL;
  long long buffers, bytes_before, buffers_before, bytes, in_use;
  const char* trimmed_host = "[{\"location\":\"host\",\"released_bytes\":";
  char name[128];
  keep(name, "reported");

  begin("stats, sessions, usage, leaks and trim: memctl's JSON documents");
  OK(memd_stats_json(client, &json, &error));
  CHECK(json != NULL && json[0] == '{' && json[strlen(json) - 1] == '}');
  CHECK(json_has(json, "{\"version\":\"%s\",\"backend\":\"", MEMD_TEST_VERSION));
  CHECK(json_has(json, "\"socket_dir\":\"%s\"", memd_client_socket_dir(client)));
  CHECK(json_number(json, "sessions") >= 1 && json_number(json, "started_unix_ns") > 0);
  CHECK(json_has(json, "\"pools\":[{\"location\":\"host\",\"reserved_bytes\":"));
  CHECK(json_has(json, "\"devices\":[],\"transfers\":{\"active\":0,"));
  CHECK(json_has(json, "\"durability\":{\"recording\":"));
  buffers = json_number(json, "buffers");
  memd_string_free(json);
  OK(memd_usage_json(client, &json, &error));
  CHECK(json[0] == '[');
  usage_of(json, "host", &bytes_before, &buffers_before);
  memd_string_free(json);

  OK(memd_create(client, name, 4096, NULL, &held, &error));
  OK(memd_stats_json(client, &json, &error));
  CHECK(json_number(json, "buffers") == buffers + 1);
  CHECK(json_number(json, "leases") >= 1);
  in_use = json_number(json, "used_bytes"); /* The host pool's, the first. */
  CHECK(in_use >= 4096);
  memd_string_free(json);
  OK(memd_usage_json(client, &json, &error));
  usage_of(json, "host", &bytes, &in_use);
  CHECK(in_use == buffers_before + 1 && bytes == bytes_before + 4096);
  memd_string_free(json);

  /* The leak report: 0 keeps the default age (an hour, far off for the
   * buffer just made), while a mark of 1 lease names this session. */
  OK(memd_leaks_json(client, 0, 1, &json, &error));
  CHECK(json_has(json, "{\"leaks\":["));
  CHECK(json_has(json, "\"kind\":\"many_leases\",\"subject\":\"session %llu (",
                 (unsigned long long)memd_client_session_id(client)));
  CHECK(json_has(json, "\"pid\":%ld,", (long)getpid()));
  CHECK(!json_has(json, "%s", name)); /* Younger than an hour. */
  CHECK(json_has(json, "],\"omitted\":0}"));
  memd_string_free(json);
  OK(memd_leaks_json(client, 0, 0, &json, &error));
  CHECK(!json_has(json, "\"subject\":\"session %llu (",
                  (unsigned long long)memd_client_session_id(client)));
  memd_string_free(json);
  json = NULL;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "3650 days",
              memd_leaks_json(client, 3651ull * 86400, 0, &json, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "json is NULL", memd_leaks_json(client, 0, 0, NULL, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "client is NULL", memd_leaks_json(NULL, 0, 0, &json, &error));
  CHECK(json == NULL);

  /* This process's session, with the id the client reports. */
  OK(memd_sessions_json(client, &json, &error));
  CHECK(json[0] == '[' && json[strlen(json) - 1] == ']');
  CHECK(json_has(json, "{\"id\":%llu,\"pid\":%ld,\"uid\":%ld,",
                 (unsigned long long)memd_client_session_id(client), (long)getpid(),
                 (long)geteuid()));
  memd_string_free(json);

  /* No copy runs: the list is empty, and says none were left out. */
  OK(memd_transfers_json(client, &json, &error));
  CHECK(strcmp(json, "{\"transfers\":[],\"omitted\":0}") == 0);
  memd_string_free(json);
  json = NULL;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "json is NULL", memd_transfers_json(client, NULL, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "client is NULL", memd_transfers_json(NULL, &json, &error));
  CHECK(json == NULL);

  /* The daemon runs as this user, who may trim. */
  OK(memd_trim_json(client, NULL, &json, &error));
  CHECK(json_has(json, "{\"location\":\"host\",\"released_bytes\":"));
  memd_string_free(json);
  OK(memd_trim_json(client, "", &json, &error));
  CHECK(json_has(json, "{\"location\":\"host\",\"released_bytes\":"));
  memd_string_free(json);
  OK(memd_trim_json(client, "host", &json, &error));
  CHECK(strncmp(json, trimmed_host, strlen(trimmed_host)) == 0);
  CHECK(strchr(json, '}') == json + strlen(json) - 2); /* One pool. */
  memd_string_free(json);
  json = NULL;
  EXPECT_CODE(MEMD_NOT_FOUND, "device:5", memd_trim_json(client, "device:5", &json, &error));

  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "json is NULL", memd_stats_json(client, NULL, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "client is NULL", memd_stats_json(NULL, &json, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "json is NULL", memd_sessions_json(client, NULL, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "client is NULL", memd_usage_json(NULL, &json, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "json is NULL", memd_trim_json(client, "host", NULL, &error));
  CHECK(json == NULL);
  memd_string_free(NULL);

  OK(memd_buffer_release(held, &error)); /* Never sealed: removed. */
  OK(memd_stats_json(client, &json, &error));
  CHECK(json_number(json, "buffers") == buffers);
  memd_string_free(json);
  pass();
}

/* What libmemd's Client::CudaDevice and DeviceLocation return where memd
 * serves no GPU. This process loads the fake CUDA driver
 * ($MEMD_CUDA_DRIVER), which shows it GPUs the daemon does not serve. */
static void gpu_numbering_without_gpus(memd_client* client) {
  int ordinal = -7;
  char* location = NULL;

  begin("GPU numbering on a daemon without GPUs");
  EXPECT_CODE(MEMD_NOT_FOUND, "memd serves no device:0 (it serves 0 GPUs)",
              memd_cuda_device(client, "device:0", &ordinal, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "'host' is not a GPU location",
              memd_cuda_device(client, "host", &ordinal, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "location is NULL",
              memd_cuda_device(client, NULL, &ordinal, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "cuda_device is NULL",
              memd_cuda_device(client, "device:0", NULL, &error));
  CHECK(ordinal == -7);
  EXPECT_CODE(MEMD_NOT_FOUND, "memd does not serve GPU",
              memd_device_location(client, 0, &location, &error));
  EXPECT_CODE(MEMD_NOT_FOUND, "this process has no CUDA device 99",
              memd_device_location(client, 99, &location, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "location is NULL",
              memd_device_location(client, 0, NULL, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "client is NULL",
              memd_device_location(NULL, 0, &location, &error));
  CHECK(location == NULL);
  pass();
}

/* Runs a copy to its end and checks that it moved `bytes`. */
static void copy_and_wait(memd_client* client, const memd_buffer* source, uint64_t source_offset,
                          memd_buffer* destination, uint64_t destination_offset,
                          uint64_t length, const memd_copy_options* options, uint64_t bytes) {
  memd_transfer* transfer = NULL;
  char progress[1024];
  OK(memd_copy(client, source, source_offset, destination, destination_offset, length, options,
               &transfer, &error));
  OK(memd_transfer_wait(transfer, -1, &error));
  progress_of(transfer, progress);
  CHECK(json_has(progress, "\"state\":\"done\""));
  CHECK(json_number(progress, "bytes_done") == (long long)bytes &&
        json_number(progress, "bytes_total") == (long long)bytes);
  memd_transfer_free(transfer);
}

static void host_copies(memd_client* client) {
  memd_buffer* a = NULL;
  memd_buffer* b = NULL;
  memd_transfer* transfer = NULL;
  memd_copy_options options;
  char progress[1024];
  const unsigned char* got;
  const unsigned char* from;
  char name_a[128];
  char name_b[128];
  keep(name_a, "copy/a");
  keep(name_b, "copy/b");

  begin("host-to-host copies: every byte, the progress document, a finished copy");
  OK(memd_create(client, name_a, 8192, NULL, &a, &error));
  OK(memd_create(client, name_b, 8192, NULL, &b, &error));
  fill(memd_buffer_mutable_data(a), 8192);
  memd_copy_options_init(&options);
  CHECK(options.struct_size == sizeof options && options.priority == MEMD_PRIORITY_NORMAL &&
        options.deadline_unix_ns == 0 && options.chunk_bytes == 0);
  CHECK(sizeof(memd_priority) == 4);
  OK(memd_copy(client, a, 0, b, 0, MEMD_TO_END, NULL, &transfer, &error));
  CHECK(memd_transfer_id(transfer) != 0);
  OK(memd_transfer_wait(transfer, -1, &error));
  CHECK(filled(memd_buffer_data(b), 8192));
  progress_of(transfer, progress);
  CHECK(json_has(progress, "{\"id\":%llu,\"state\":\"done\",\"bytes_done\":8192,"
                           "\"bytes_total\":8192,\"direction\":\"h2h\",\"path\":\"cpu\","
                           "\"device\":-1,\"retries\":0,\"error_code\":0,\"error_message\":\"\","
                           "\"elapsed_ns\":",
                 (unsigned long long)memd_transfer_id(transfer)));
  CHECK(json_number(progress, "elapsed_ns") >= 0);
  /* Finished: a cancel changes nothing, and a wait of 0 ms returns how it ended. */
  OK(memd_transfer_cancel(transfer, &error));
  OK(memd_transfer_wait(transfer, 0, &error));
  progress_of(transfer, progress);
  CHECK(json_has(progress, "\"state\":\"done\"") && json_number(progress, "error_code") == 0);
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "timeout_ms is -2", memd_transfer_wait(transfer, -2, &error));
  memd_transfer_free(transfer);
  pass();

  begin("copies with offsets, lengths, MEMD_TO_END and options");
  memset(memd_buffer_mutable_data(b), 0, 8192);
  options.priority = MEMD_PRIORITY_CRITICAL;
  options.deadline_unix_ns = now_unix_ns() + (int64_t)60 * 1000000000;
  options.chunk_bytes = 1 << 20;
  copy_and_wait(client, a, 100, b, 4000, 50, &options, 50);
  got = memd_buffer_data(b);
  from = memd_buffer_data(a);
  CHECK(got[3999] == 0 && got[4050] == 0 && memcmp(got + 4000, from + 100, 50) == 0);
  /* MEMD_TO_END: each range to the end of its buffer, 4096 bytes both. */
  memset(memd_buffer_mutable_data(b), 0, 8192);
  options.priority = MEMD_PRIORITY_BACKGROUND;
  copy_and_wait(client, a, 4096, b, 4096, MEMD_TO_END, &options, 4096);
  CHECK(got[4095] == 0 && memcmp(got + 4096, from + 4096, 4096) == 0);
  /* An older, shorter struct: the fields it lacks take their defaults. */
  memset(&options, 0x7f, sizeof options);
  options.struct_size = offsetof(memd_copy_options, priority) + sizeof options.priority;
  options.priority = MEMD_PRIORITY_NORMAL;
  copy_and_wait(client, a, 0, b, 0, 8192, &options, 8192);
  CHECK(filled(got, 8192));
  pass();

  begin("copy errors, before anything moves");
  transfer = NULL; /* Failed calls must leave it NULL. */
  /* MEMD_TO_END with ranges of different lengths, as Python's length=None. */
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "the source region is 8192 bytes and the destination 8092",
              memd_copy(client, a, 0, b, 100, MEMD_TO_END, NULL, &transfer, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "(offset 8000, length 200) reaches past the end",
              memd_copy(client, a, 8000, b, 0, 200, NULL, &transfer, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "offset 9000 is past the end",
              memd_copy(client, a, 9000, b, 0, MEMD_TO_END, NULL, &transfer, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "overlap",
              memd_copy(client, a, 0, a, 100, 200, NULL, &transfer, &error));
  memd_copy_options_init(&options);
  options.chunk_bytes = 4096;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "chunk size 4096 bytes",
              memd_copy(client, a, 0, b, 0, MEMD_TO_END, &options, &transfer, &error));
  memd_copy_options_init(&options);
  options.priority = (memd_priority)7;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "priority is 7",
              memd_copy(client, a, 0, b, 0, MEMD_TO_END, &options, &transfer, &error));
  memd_copy_options_init(&options);
  options.deadline_unix_ns = now_unix_ns() - 1000000000;
  EXPECT_CODE(MEMD_DEADLINE_EXCEEDED, "deadline passed",
              memd_copy(client, a, 0, b, 0, MEMD_TO_END, &options, &transfer, &error));
  memd_copy_options_init(&options);
  options.struct_size = sizeof options + 8;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "memd_copy_options.struct_size",
              memd_copy(client, a, 0, b, 0, MEMD_TO_END, &options, &transfer, &error));
  options.struct_size = 3;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "struct_size is 3",
              memd_copy(client, a, 0, b, 0, MEMD_TO_END, &options, &transfer, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "client is NULL",
              memd_copy(NULL, a, 0, b, 0, MEMD_TO_END, NULL, &transfer, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "source is NULL",
              memd_copy(client, NULL, 0, b, 0, MEMD_TO_END, NULL, &transfer, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "destination is NULL",
              memd_copy(client, a, 0, NULL, 0, MEMD_TO_END, NULL, &transfer, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "transfer is NULL",
              memd_copy(client, a, 0, b, 0, MEMD_TO_END, NULL, NULL, &error));
  OK(memd_buffer_seal(b, &error));
  EXPECT_CODE(MEMD_FAILED_PRECONDITION, "sealed",
              memd_copy(client, a, 0, b, 0, MEMD_TO_END, NULL, &transfer, &error));
  CHECK(transfer == NULL);

  CHECK(memd_transfer_id(NULL) == 0);
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "transfer is NULL", memd_transfer_wait(NULL, -1, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "transfer is NULL",
              memd_transfer_progress_json(NULL, NULL, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "transfer is NULL", memd_transfer_cancel(NULL, &error));
  memd_transfer_free(NULL);
  OK(memd_buffer_release(a, &error));
  OK(memd_buffer_release(b, &error));
  OK(memd_unlink(client, name_b, &error));
  pass();
}

/* A transfer keeps what it needs of its client: waits and progress work
 * after memd_client_close, and a copy names leases of its own client. */
static void transfer_outlives_client(memd_client* other) {
  memd_client* client = connect_default();
  memd_buffer* a = NULL;
  memd_buffer* b = NULL;
  memd_buffer* foreign = NULL;
  memd_transfer* transfer = NULL;
  char progress[1024];
  char name_a[128];
  char name_b[128];
  keep(name_a, "outlived/a");
  keep(name_b, "outlived/b");

  begin("a transfer outlives its client; a copy names its own client's leases");
  OK(memd_create(client, name_a, 4096, NULL, &a, &error));
  OK(memd_create(client, name_b, 4096, NULL, &b, &error));
  OK(memd_create(other, named("outlived/foreign"), 4096, NULL, &foreign, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "opened by another Client",
              memd_copy(client, foreign, 0, b, 0, MEMD_TO_END, NULL, &transfer, &error));
  fill(memd_buffer_mutable_data(a), 4096);
  OK(memd_copy(client, a, 0, b, 0, MEMD_TO_END, NULL, &transfer, &error));
  memd_client_close(client);
  OK(memd_transfer_wait(transfer, -1, &error));
  progress_of(transfer, progress);
  CHECK(json_has(progress, "\"state\":\"done\",\"bytes_done\":4096,"));
  CHECK(filled(memd_buffer_data(b), 4096));
  memd_transfer_free(transfer);
  OK(memd_buffer_release(a, &error));
  OK(memd_buffer_release(b, &error));
  OK(memd_buffer_release(foreign, &error));
  pass();
}

/* As a CUDA program would have before it opens device buffers: a current
 * context on device 0, from the driver in $MEMD_CUDA_DRIVER (the fake). */
static void make_cuda_context_current(void) {
  typedef CUresult (*init_fn)(unsigned);
  typedef CUresult (*device_get_fn)(CUdevice*, int);
  typedef CUresult (*retain_fn)(CUcontext*, CUdevice);
  typedef CUresult (*set_current_fn)(CUcontext);
  const char* path = getenv("MEMD_CUDA_DRIVER");
  void* driver;
  init_fn init;
  device_get_fn device_get;
  retain_fn retain;
  set_current_fn set_current;
  CUdevice device;
  CUcontext context;

  CHECK(path != NULL && (driver = dlopen(path, RTLD_NOW)) != NULL);
  /* POSIX lets a data pointer become a function pointer through memcpy. */
  {
    void* symbol;
    symbol = dlsym(driver, "cuInit");
    CHECK(symbol != NULL);
    memcpy(&init, &symbol, sizeof symbol);
    symbol = dlsym(driver, "cuDeviceGet");
    CHECK(symbol != NULL);
    memcpy(&device_get, &symbol, sizeof symbol);
    symbol = dlsym(driver, "cuDevicePrimaryCtxRetain");
    CHECK(symbol != NULL);
    memcpy(&retain, &symbol, sizeof symbol);
    symbol = dlsym(driver, "cuCtxSetCurrent");
    CHECK(symbol != NULL);
    memcpy(&set_current, &symbol, sizeof symbol);
  }
  CHECK(init(0) == CUDA_SUCCESS);
  CHECK(device_get(&device, 0) == CUDA_SUCCESS);
  CHECK(retain(&context, device) == CUDA_SUCCESS);
  CHECK(set_current(context) == CUDA_SUCCESS);
}

/* DLPack's kDLOneAPI, from DLPack 0.7 on (Level Zero devices). */
#define K_DL_ONEAPI 14

/* A device:0 buffer: its device pointer and a DLPack tensor of
 * `device_type` (kDLCUDA on a CUDA daemon, kDLOneAPI on a Level Zero one). */
static void device_buffer(memd_client* client, int device_type, const char* what) {
  memd_create_options create;
  memd_buffer* buffer = NULL;
  DLManagedTensor* tensor = NULL;

  begin(what);
  memd_create_options_init(&create);
  create.location = "device:0";
  OK(memd_create(client, named("gpu"), 1 << 20, &create, &buffer, &error));
  CHECK(memd_buffer_data(buffer) == NULL && memd_buffer_mutable_data(buffer) == NULL);
  CHECK(memd_buffer_device(buffer) == 0 && memd_buffer_device_pointer(buffer) != 0);
  CHECK(memd_buffer_device_type(buffer) == device_type);
  CHECK(strcmp(memd_buffer_get_info(buffer)->location, "device:0") == 0);
  OK(memd_buffer_to_dlpack(buffer, NULL, &tensor, &error));
  CHECK((int)tensor->dl_tensor.device.device_type == device_type &&
        tensor->dl_tensor.device.device_id == 0);
  CHECK((uint64_t)(uintptr_t)tensor->dl_tensor.data == memd_buffer_device_pointer(buffer));
  CHECK(tensor->dl_tensor.shape[0] == (1 << 20));
  tensor->deleter(tensor);
  OK(memd_buffer_seal(buffer, &error));
  OK(memd_buffer_release(buffer, &error));
  OK(memd_unlink(client, named("gpu"), &error));
  pass();
}

/* On a daemon on the fake CUDA driver, seen by this process through the
 * same fake: memd's device:0 is this process's CUDA device 0. */
static void device_numbering(memd_client* client) {
  int ordinal = -1;
  char* location = NULL;
  char* json = NULL;

  begin("GPU numbering: memd's device:0 is this process's CUDA device 0");
  OK(memd_cuda_device(client, "device:0", &ordinal, &error));
  CHECK(ordinal == 0);
  OK(memd_device_location(client, 0, &location, &error));
  CHECK(strcmp(location, "device:0") == 0);
  memd_string_free(location);
  EXPECT_CODE(MEMD_NOT_FOUND, "memd serves no device:9",
              memd_cuda_device(client, "device:9", &ordinal, &error));
  OK(memd_stats_json(client, &json, &error));
  CHECK(json_has(json, "\"devices\":[{\"ordinal\":0,\"uuid\":\"GPU-"));
  memd_string_free(json);
  pass();
}

static void device_copies(memd_client* client) {
  memd_create_options create;
  memd_buffer* host = NULL;
  memd_buffer* gpu = NULL;
  memd_buffer* back = NULL;
  memd_transfer* transfer = NULL;
  char progress[1024];

  begin("copies to and from a device buffer");
  OK(memd_create(client, named("copy/host"), 1 << 20, NULL, &host, &error));
  OK(memd_create(client, named("copy/back"), 1 << 20, NULL, &back, &error));
  memd_create_options_init(&create);
  create.location = "device:0";
  OK(memd_create(client, named("copy/gpu"), 1 << 20, &create, &gpu, &error));
  fill(memd_buffer_mutable_data(host), 1 << 20);
  OK(memd_copy(client, host, 0, gpu, 0, MEMD_TO_END, NULL, &transfer, &error));
  OK(memd_transfer_wait(transfer, -1, &error));
  progress_of(transfer, progress);
  CHECK(json_has(progress, "\"state\":\"done\",\"bytes_done\":1048576,\"bytes_total\":1048576,"
                           "\"direction\":\"h2d\","));
  CHECK(json_number(progress, "device") == 0 && json_number(progress, "error_code") == 0);
  memd_transfer_free(transfer);
  OK(memd_copy(client, gpu, 0, back, 0, MEMD_TO_END, NULL, &transfer, &error));
  OK(memd_transfer_wait(transfer, -1, &error));
  progress_of(transfer, progress);
  CHECK(json_has(progress, "\"state\":\"done\",\"bytes_done\":1048576,") &&
        json_has(progress, "\"direction\":\"d2h\","));
  CHECK(filled(memd_buffer_data(back), 1 << 20));
  memd_transfer_free(transfer);
  OK(memd_buffer_release(gpu, &error));
  OK(memd_buffer_release(back, &error));
  OK(memd_buffer_release(host, &error));
  pass();
}

/* The replica of `info` at `location`, or NULL. */
static const memd_replica* replica_at(const memd_buffer_info* info, const char* location) {
  size_t i;
  for (i = 0; i < info->replica_count; ++i) {
    if (strcmp(info->replicas[i].location, location) == 0) return &info->replicas[i];
  }
  return NULL;
}

/* A sealed host buffer opened at device:0 (the daemon copies it there),
 * dropped, prefetched back; a writer's sync. */
static void replicas(memd_client* client) {
  memd_open_options open;
  memd_prefetch_options prefetch;
  memd_buffer* host = NULL;
  memd_buffer* gpu = NULL;
  memd_buffer_info* info = NULL;
  char name[128];
  keep(name, "replicas");

  begin("an open at a location, a prefetch and a drop");
  OK(memd_create(client, name, 1 << 20, NULL, &host, &error));
  fill(memd_buffer_mutable_data(host), 1 << 20);
  OK(memd_buffer_seal(host, &error));
  OK(memd_buffer_release(host, &error));
  memd_open_options_init(&open);
  open.location = "device:0";
  OK(memd_open(client, name, &open, &gpu, &error));
  CHECK(strcmp(memd_buffer_get_info(gpu)->location, "device:0") == 0);
  CHECK(memd_buffer_device_pointer(gpu) != 0);
  OK(memd_stat(client, name, &info, &error));
  CHECK(strcmp(info->location, "host") == 0 && info->replica_count == 2);
  CHECK(strcmp(info->sync_state, "synchronized") == 0 && strcmp(info->fill_failure, "") == 0);
  CHECK(replica_at(info, "device:0") != NULL && replica_at(info, "device:0")->readers == 1);
  CHECK(strcmp(replica_at(info, "device:0")->state, "current") == 0);
  CHECK(replica_at(info, "device:0")->generation == info->generation);
  CHECK(replica_at(info, "device:0")->bytes >= (1 << 20));
  CHECK(replica_at(info, "device:0")->charged_uid == (uint32_t)getuid());
  memd_buffer_info_free(info);
  EXPECT_CODE(MEMD_FAILED_PRECONDITION, "",
              memd_drop_replica(client, name, "device:0", NULL, &error));
  OK(memd_buffer_release(gpu, &error));
  OK(memd_drop_replica(client, name, "device:0", &info, &error));
  CHECK(info->replica_count == 1 && replica_at(info, "device:0") == NULL);
  memd_buffer_info_free(info);
  OK(memd_prefetch(client, name, "device:0", 60000, &info, &error));
  CHECK(info->replica_count == 2 && strcmp(replica_at(info, "device:0")->state, "current") == 0);
  CHECK(replica_at(info, "device:0")->readers == 0);
  memd_buffer_info_free(info);
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "location is NULL",
              memd_prefetch(client, name, NULL, 0, &info, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "wait_ms", memd_prefetch(client, name, "device:0", -1,
                                                              &info, &error));
  pass();

  begin("a prefetch and an open whose copies may wait for memory");
  memd_prefetch_options_init(&prefetch);
  CHECK(prefetch.struct_size == sizeof(prefetch) && prefetch.wait_ms == 0);
  CHECK(prefetch.wait_for_memory_ms == 0 && prefetch.owner == -1);
  OK(memd_drop_replica(client, name, "device:0", NULL, &error));
  prefetch.wait_for_memory_ms = 60000;
  OK(memd_prefetch_with(client, name, "device:0", &prefetch, &info, &error));
  CHECK(strcmp(replica_at(info, "device:0")->state, "current") == 0);
  memd_buffer_info_free(info);
  prefetch.owner = (int64_t)getuid() + 1;
  EXPECT_CODE(MEMD_PERMISSION_DENIED, "",
              memd_prefetch_with(client, name, "device:0", &prefetch, NULL, &error));
  prefetch.owner = -1;
  prefetch.wait_for_memory_ms = -1;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "wait_for_memory_ms",
              memd_prefetch_with(client, name, "device:0", &prefetch, NULL, &error));
  prefetch.wait_for_memory_ms = 0;
  prefetch.struct_size = sizeof(prefetch) + 8;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "memd_prefetch_options.struct_size",
              memd_prefetch_with(client, name, "device:0", &prefetch, NULL, &error));
  OK(memd_prefetch_with(client, name, "device:0", NULL, NULL, &error));
  memd_open_options_init(&open);
  CHECK(open.wait_for_memory_ms == 0);
  open.location = "device:0";
  open.wait_for_memory_ms = 60000;
  OK(memd_open(client, name, &open, &gpu, &error));
  CHECK(strcmp(memd_buffer_get_info(gpu)->location, "device:0") == 0);
  OK(memd_buffer_release(gpu, &error));
  open.location = NULL;
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "needs a location",
              memd_open(client, name, &open, &gpu, &error));
  OK(memd_unlink(client, name, &error));
  pass();

  begin("a writer's sync publishes a new generation");
  OK(memd_create(client, name, 4096, NULL, &host, &error));
  OK(memd_buffer_sync(host, &info, &error));
  CHECK(info->generation >= 1 && strcmp(info->location, "host") == 0);
  memd_buffer_info_free(info);
  OK(memd_buffer_seal(host, &error));
  EXPECT_CODE(MEMD_FAILED_PRECONDITION, "", memd_buffer_sync(host, NULL, &error));
  EXPECT_CODE(MEMD_INVALID_ARGUMENT, "buffer is NULL", memd_buffer_sync(NULL, NULL, &error));
  OK(memd_buffer_release(host, &error));
  OK(memd_unlink(client, name, &error));
  pass();
}

/* The daemon's fake link moves 20 MB/s: a 32 MiB copy takes over a second,
 * longer than any wait here lets it. */
static void slow_copies(memd_client* client) {
  const uint64_t size = (uint64_t)32 << 20;
  memd_create_options create;
  memd_copy_options options;
  memd_buffer* host = NULL;
  memd_buffer* gpu = NULL;
  memd_transfer* transfer = NULL;
  char progress[1024];
  char* json = NULL;

  begin("a wait that runs out leaves the copy going until cancelled");
  OK(memd_create(client, named("slow/host"), size, NULL, &host, &error));
  memd_create_options_init(&create);
  create.location = "device:0";
  OK(memd_create(client, named("slow/gpu"), size, &create, &gpu, &error));
  OK(memd_copy(client, host, 0, gpu, 0, MEMD_TO_END, NULL, &transfer, &error));
  EXPECT_CODE(MEMD_DEADLINE_EXCEEDED, "goes on; this wait ran out",
              memd_transfer_wait(transfer, 0, &error));
  progress_of(transfer, progress);
  CHECK(json_has(progress, "\"state\":\"queued\"") || json_has(progress, "\"state\":\"running\""));
  CHECK(json_number(progress, "bytes_total") == (long long)size);
  CHECK(json_number(progress, "error_code") == 0); /* The wait ran out, not the copy. */
  OK(memd_transfer_cancel(transfer, &error));
  EXPECT_CODE(MEMD_CANCELLED, "", memd_transfer_wait(transfer, -1, &error));
  progress_of(transfer, progress);
  CHECK(json_has(progress, "\"state\":\"cancelled\""));
  CHECK(json_number(progress, "bytes_done") < (long long)size);
  CHECK(json_number(progress, "error_code") == MEMD_CANCELLED);
  memd_transfer_free(transfer);
  pass();

  begin("a copy's own deadline fails it");
  memd_copy_options_init(&options);
  options.deadline_unix_ns = now_unix_ns() + 100 * 1000000;
  OK(memd_copy(client, host, 0, gpu, 0, MEMD_TO_END, &options, &transfer, &error));
  EXPECT_CODE(MEMD_DEADLINE_EXCEEDED, "", memd_transfer_wait(transfer, -1, &error));
  progress_of(transfer, progress);
  CHECK(json_has(progress, "\"state\":\"failed\""));
  CHECK(json_number(progress, "error_code") == MEMD_DEADLINE_EXCEEDED);
  memd_transfer_free(transfer);
  pass();

  begin("freeing a transfer leaves its copy running");
  OK(memd_copy(client, host, 0, gpu, 0, MEMD_TO_END, NULL, &transfer, &error));
  memd_transfer_free(transfer);
  OK(memd_stats_json(client, &json, &error));
  CHECK(json_has(json, "\"transfers\":{\"active\":1,\"active_bytes\":%llu,",
                 (unsigned long long)size));
  memd_string_free(json);
  OK(memd_buffer_release(host, &error));
  OK(memd_buffer_release(gpu, &error));
  pass();
}

int main(int argc, char** argv) {
  memd_client* client;
  if (argc != 2 || (strcmp(argv[1], "host") != 0 && strcmp(argv[1], "device") != 0 &&
                    strcmp(argv[1], "level_zero") != 0 && strcmp(argv[1], "slow_copy") != 0)) {
    fprintf(stderr,
            "usage: %s host|device|level_zero|slow_copy  (daemon on $MEMD_SOCKET_DIR)\n",
            argv[0]);
    return 2;
  }
  snprintf(g_prefix, sizeof g_prefix, "c-api-test-%ld", (long)getpid());
  client = connect_default();
  if (strcmp(argv[1], "device") == 0) {
    make_cuda_context_current();
    device_buffer(client, kDLCUDA, "device buffers: a device pointer and a kDLCUDA tensor");
    device_numbering(client);
    device_copies(client);
    replicas(client);
  } else if (strcmp(argv[1], "slow_copy") == 0) {
    make_cuda_context_current();
    slow_copies(client);
  } else if (strcmp(argv[1], "level_zero") == 0) {
    /* No context passed: libmemd opens the buffer in a context of its own. */
    device_buffer(client, K_DL_ONEAPI,
                  "Level Zero device buffers: a device pointer and a kDLOneAPI tensor");
  } else {
    versions_and_errors();
    connect_errors();
    session_ping_and_lease_ids(client);
    reports_as_json(client);
    gpu_numbering_without_gpus(client);
    create_write_seal_open(client);
    write_from_file(client);
    open_and_create_errors(client);
    older_and_newer_option_structs(client);
    location_auto(client);
    open_or_create_stat_list(client);
    dlpack_host(client);
    dlpack_versioned_and_hook(client);
    host_copies(client);
    transfer_outlives_client(client);
    buffer_outlives_client();
  }
  memd_client_close(client);
  return 0;
}
