/* vectorscan (libhs, Debian's libhs5): the functions supervisor/guards calls, forwarded to the library
 * loaded on first use (dlopen.h says why). Prototypes are hs_compile.h / hs_runtime.h / hs_common.h's;
 * when the library cannot be loaded every function returns an hs_error_t error (compile functions also a
 * compile error whose message names the library), never crashes. */
#include <hs.h>
#include <stddef.h>

#include "supervisor/dlopen/dlopen.h"

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
#define SONAME "libhs.so." STRINGIFY(HS_MAJOR)

static struct {
  __typeof__(hs_compile_multi) *compile_multi;
  __typeof__(hs_free_compile_error) *free_compile_error;
  __typeof__(hs_expression_info) *expression_info;
  __typeof__(hs_alloc_scratch) *alloc_scratch;
  __typeof__(hs_clone_scratch) *clone_scratch;
  __typeof__(hs_free_scratch) *free_scratch;
  __typeof__(hs_free_database) *free_database;
  __typeof__(hs_open_stream) *open_stream;
  __typeof__(hs_scan_stream) *scan_stream;
  __typeof__(hs_close_stream) *close_stream;
  __typeof__(hs_valid_platform) *valid_platform;
} library;
static int state;

static bool load(void) {
  static const char *const names[] = {"hs_compile_multi", "hs_free_compile_error", "hs_expression_info",
                                      "hs_alloc_scratch", "hs_clone_scratch",      "hs_free_scratch",
                                      "hs_free_database", "hs_open_stream",        "hs_scan_stream",
                                      "hs_close_stream",  "hs_valid_platform"};
  void **const slots[] = {(void **)&library.compile_multi,   (void **)&library.free_compile_error,
                          (void **)&library.expression_info, (void **)&library.alloc_scratch,
                          (void **)&library.clone_scratch,   (void **)&library.free_scratch,
                          (void **)&library.free_database,   (void **)&library.open_stream,
                          (void **)&library.scan_stream,     (void **)&library.close_stream,
                          (void **)&library.valid_platform};
  return dome_dlopen_resolve(SONAME, names, slots, (int)(sizeof names / sizeof names[0]), &state);
}

/* The compile error handed out when the library is missing; hs_free_compile_error knows it. */
static hs_compile_error_t unavailable = {.message = (char *)"vectorscan (" SONAME ") cannot be loaded",
                                         .expression = -1};

hs_error_t hs_compile_multi(const char *const *expressions, const unsigned int *flags,
                            const unsigned int *ids, unsigned int elements, unsigned int mode,
                            const hs_platform_info_t *platform, hs_database_t **db,
                            hs_compile_error_t **error) {
  if (!load()) {
    *db = NULL;
    *error = &unavailable;
    return HS_COMPILER_ERROR;
  }
  return library.compile_multi(expressions, flags, ids, elements, mode, platform, db, error);
}

hs_error_t hs_free_compile_error(hs_compile_error_t *error) {
  if (error == NULL || error == &unavailable) return HS_SUCCESS;
  return load() ? library.free_compile_error(error) : HS_INVALID;
}

hs_error_t hs_expression_info(const char *expression, unsigned int flags, hs_expr_info_t **info,
                              hs_compile_error_t **error) {
  if (!load()) {
    *info = NULL;
    *error = &unavailable;
    return HS_COMPILER_ERROR;
  }
  return library.expression_info(expression, flags, info, error);
}

hs_error_t hs_alloc_scratch(const hs_database_t *db, hs_scratch_t **scratch) {
  return load() ? library.alloc_scratch(db, scratch) : HS_INVALID;
}

hs_error_t hs_clone_scratch(const hs_scratch_t *source, hs_scratch_t **destination) {
  return load() ? library.clone_scratch(source, destination) : HS_INVALID;
}

hs_error_t hs_free_scratch(hs_scratch_t *scratch) {
  if (scratch == NULL) return HS_SUCCESS;
  return load() ? library.free_scratch(scratch) : HS_INVALID;
}

hs_error_t hs_free_database(hs_database_t *db) {
  if (db == NULL) return HS_SUCCESS;
  return load() ? library.free_database(db) : HS_INVALID;
}

hs_error_t hs_open_stream(const hs_database_t *db, unsigned int flags, hs_stream_t **stream) {
  return load() ? library.open_stream(db, flags, stream) : HS_INVALID;
}

hs_error_t hs_scan_stream(hs_stream_t *id, const char *data, unsigned int length, unsigned int flags,
                          hs_scratch_t *scratch, match_event_handler on_event, void *context) {
  return load() ? library.scan_stream(id, data, length, flags, scratch, on_event, context) : HS_INVALID;
}

hs_error_t hs_close_stream(hs_stream_t *id, hs_scratch_t *scratch, match_event_handler on_event,
                           void *context) {
  return load() ? library.close_stream(id, scratch, on_event, context) : HS_INVALID;
}

hs_error_t hs_valid_platform(void) {
  return load() ? library.valid_platform() : HS_ARCH_ERROR;
}
