/* libnftables (Debian's libnftables1): the functions supervisor/net calls, forwarded to the library
 * loaded on first use (dlopen.h says why). Prototypes are nftables/libnftables.h's. When the library
 * cannot be loaded nft_ctx_new returns NULL (the callers' existing error path) and the others fail. */
#include <nftables/libnftables.h>
#include <stddef.h>

#include "supervisor/dlopen/dlopen.h"

/* libnftables' soname; its header has no version macro. */
#define SONAME "libnftables.so.1"

static struct {
  __typeof__(nft_ctx_new) *ctx_new;
  __typeof__(nft_ctx_free) *ctx_free;
  __typeof__(nft_ctx_buffer_output) *ctx_buffer_output;
  __typeof__(nft_ctx_get_output_buffer) *ctx_get_output_buffer;
  __typeof__(nft_ctx_buffer_error) *ctx_buffer_error;
  __typeof__(nft_ctx_get_error_buffer) *ctx_get_error_buffer;
  __typeof__(nft_run_cmd_from_buffer) *run_cmd_from_buffer;
  __typeof__(nft_ctx_output_get_flags) *ctx_output_get_flags;
  __typeof__(nft_ctx_output_set_flags) *ctx_output_set_flags;
} library;
static int state;

static bool load(void) {
  static const char *const names[] = {"nft_ctx_new",
                                      "nft_ctx_free",
                                      "nft_ctx_buffer_output",
                                      "nft_ctx_get_output_buffer",
                                      "nft_ctx_buffer_error",
                                      "nft_ctx_get_error_buffer",
                                      "nft_run_cmd_from_buffer",
                                      "nft_ctx_output_get_flags",
                                      "nft_ctx_output_set_flags"};
  void **const slots[] = {(void **)&library.ctx_new,
                          (void **)&library.ctx_free,
                          (void **)&library.ctx_buffer_output,
                          (void **)&library.ctx_get_output_buffer,
                          (void **)&library.ctx_buffer_error,
                          (void **)&library.ctx_get_error_buffer,
                          (void **)&library.run_cmd_from_buffer,
                          (void **)&library.ctx_output_get_flags,
                          (void **)&library.ctx_output_set_flags};
  return dome_dlopen_resolve(SONAME, names, slots, (int)(sizeof names / sizeof names[0]), &state);
}

struct nft_ctx *nft_ctx_new(uint32_t flags) {
  return load() ? library.ctx_new(flags) : NULL;
}

void nft_ctx_free(struct nft_ctx *ctx) {
  if (ctx != NULL && load()) library.ctx_free(ctx);
}

int nft_ctx_buffer_output(struct nft_ctx *ctx) {
  return load() ? library.ctx_buffer_output(ctx) : -1;
}

const char *nft_ctx_get_output_buffer(struct nft_ctx *ctx) {
  return load() ? library.ctx_get_output_buffer(ctx) : NULL;
}

int nft_ctx_buffer_error(struct nft_ctx *ctx) {
  return load() ? library.ctx_buffer_error(ctx) : -1;
}

const char *nft_ctx_get_error_buffer(struct nft_ctx *ctx) {
  return load() ? library.ctx_get_error_buffer(ctx) : NULL;
}

int nft_run_cmd_from_buffer(struct nft_ctx *nft, const char *buf) {
  return load() ? library.run_cmd_from_buffer(nft, buf) : -1;
}

unsigned int nft_ctx_output_get_flags(struct nft_ctx *ctx) {
  return load() ? library.ctx_output_get_flags(ctx) : 0;
}

void nft_ctx_output_set_flags(struct nft_ctx *ctx, unsigned int flags) {
  if (load()) library.ctx_output_set_flags(ctx, flags);
}
