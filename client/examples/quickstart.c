/* Share a buffer through memd from C: create it with attributes, fill it,
 * seal it, open it read-only, read it back, unlink it (so that it runs
 * again). Build and run:
 *   cc quickstart.c $(pkg-config --cflags --libs memd) -o quickstart
 *   ./quickstart quickstart/c "hello from C" */
#include <stdio.h>
#include <string.h>

#include <memd/memd.h>

static int fail(const char* what, memd_error* error) {
  fprintf(stderr, "%s: %s: %s\n", what, memd_code_name(memd_error_code(error)),
          memd_error_message(error));
  memd_error_free(error);
  return 1;
}

int main(int argc, char** argv) {
  memd_client* client = NULL;
  memd_buffer* writer = NULL;
  memd_buffer* reader = NULL;
  memd_error* error = NULL;
  memd_create_options create;
  memd_open_options open;
  memd_attr attrs[1] = {{"encoding", "utf-8"}};
  if (argc != 3) return 2;
  const char* name = argv[1];
  const char* text = argv[2];

  if (memd_connect(NULL, &client, &error) != MEMD_OK) return fail("connect", error);
  memd_create_options_init(&create);
  create.attrs = attrs;
  create.attr_count = 1;
  if (memd_create(client, name, strlen(text), &create, &writer, &error) != MEMD_OK) {
    return fail("create", error);
  }
  memcpy(memd_buffer_mutable_data(writer), text, strlen(text));
  if (memd_buffer_seal(writer, &error) != MEMD_OK) return fail("seal", error);

  memd_open_options_init(&open);
  open.wait_ms = 5000; /* for the seal, had another process written it */
  if (memd_open(client, name, &open, &reader, &error) != MEMD_OK) return fail("open", error);
  printf("%s holds \"%.*s\" (encoding %s)\n", name, (int)memd_buffer_size(reader),
         (const char*)memd_buffer_data(reader), memd_buffer_attr(reader, "encoding"));

  memd_buffer_release(reader, NULL);
  memd_buffer_release(writer, NULL);
  /* The name goes now, its memory with the last lease: a second run
   * creates it afresh instead of failing with ALREADY_EXISTS. */
  if (memd_unlink(client, name, &error) != MEMD_OK) return fail("unlink", error);
  memd_client_close(client);
  return 0;
}
