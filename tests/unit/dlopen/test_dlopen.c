/* supervisor/dlopen: libraries resolved on first use; a missing library or symbol is a clean failure,
 * remembered, never a crash; the forwarders reach the real library; the programs do not link the
 * libraries (nor what they pull in), and libnats is loaded only when a nats function is first called.
 * Without libnats, its forwarders fail with an error naming it and `dome audit verify --fleet` says so. */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <hs.h>
#include <limits.h>
#include <link.h>
#include <nats/nats.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "supervisor/dlopen/dlopen.h"

static void missing_library_fails_and_stays_failed(void **state) {
  (void)state;
  static int library_state;
  void *slot = (void *)1;
  const char *const names[] = {"anything"};
  void **const slots[] = {&slot};
  assert_false(dome_dlopen_resolve("libdome-does-not-exist.so.9", names, slots, 1, &library_state));
  assert_false(dome_dlopen_resolve("libdome-does-not-exist.so.9", names, slots, 1, &library_state));
  assert_ptr_equal(slot, (void *)1); /* untouched */
}

static void missing_symbol_fails(void **state) {
  (void)state;
  static int library_state;
  void *first = NULL, *second = NULL;
  const char *const names[] = {"zstd_does_not_have_this", "ZSTD_versionNumber"};
  void **const slots[] = {&first, &second};
  assert_false(dome_dlopen_resolve("libzstd.so.1", names, slots, 2, &library_state));
}

static void present_library_resolves(void **state) {
  (void)state;
  static int library_state;
  unsigned (*version)(void) = NULL;
  const char *const names[] = {"ZSTD_versionNumber"};
  void **const slots[] = {(void **)&version};
  assert_true(dome_dlopen_resolve("libzstd.so.1", names, slots, 1, &library_state));
  assert_non_null(version);
  assert_true(version() >= 10400); /* zstd 1.4+ */
}

static void vectorscan_forwarders_work(void **state) {
  (void)state;
  assert_int_equal(hs_valid_platform(), HS_SUCCESS);
  const char *expressions[] = {"ab+c"};
  unsigned flags[] = {HS_FLAG_SINGLEMATCH}, ids[] = {7};
  hs_database_t *db = NULL;
  hs_compile_error_t *error = NULL;
  assert_int_equal(hs_compile_multi(expressions, flags, ids, 1, HS_MODE_STREAM, NULL, &db, &error),
                   HS_SUCCESS);
  hs_scratch_t *scratch = NULL;
  assert_int_equal(hs_alloc_scratch(db, &scratch), HS_SUCCESS);
  hs_free_scratch(scratch);
  hs_free_database(db);
  /* a compile error comes back as such and is freed through the forwarder */
  const char *bad[] = {"(unclosed"};
  assert_int_equal(hs_compile_multi(bad, flags, ids, 1, HS_MODE_STREAM, NULL, &db, &error),
                   HS_COMPILER_ERROR);
  assert_non_null(error);
  assert_non_null(strstr(error->message, "arenthes"));
  assert_int_equal(hs_free_compile_error(error), HS_SUCCESS);
}

static void nftables_forwarders_work(void **state) {
  (void)state;
  struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
  assert_non_null(ctx);
  assert_int_equal(nft_ctx_buffer_output(ctx), 0);
  assert_int_equal(nft_ctx_buffer_error(ctx), 0);
  unsigned flags = nft_ctx_output_get_flags(ctx);
  nft_ctx_output_set_flags(ctx, flags | NFT_CTX_OUTPUT_JSON);
  assert_int_equal(nft_ctx_output_get_flags(ctx), flags | NFT_CTX_OUTPUT_JSON);
  /* a syntax error is reported in the error buffer, nothing is applied */
  assert_int_not_equal(nft_run_cmd_from_buffer(ctx, "this is not nft"), 0);
  assert_non_null(nft_ctx_get_error_buffer(ctx));
  nft_ctx_free(ctx);
}

/* ---- libnats ---- */

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
#define NATS_SONAME "libnats.so." STRINGIFY(NATS_VERSION_MAJOR) "." STRINGIFY(NATS_VERSION_MINOR)

static bool nats_mapped(void) {
  void *handle = dlopen(NATS_SONAME, RTLD_LAZY | RTLD_NOLOAD);
  if (handle) dlclose(handle);
  return handle != NULL;
}

/* `name` (a program of the build: "dome", "domed") beside this test's build tree: the test is
 * BUILD/tests/unit/dlopen/test_dlopen (BUILD/asan/... in the sanitizer build, whose programs are there). */
static bool build_program(const char *name, char *path, size_t size) {
  char self[PATH_MAX];
  ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
  if (length <= 0) return false;
  self[length] = '\0';
  char *cut = strstr(self, "/tests/unit/dlopen/");
  if (cut == NULL) return false;
  *cut = '\0';
  snprintf(path, size, "%s/%s", self, name);
  return access(path, X_OK) == 0;
}

/* The DT_NEEDED entries of the ELF file `path`, each followed by a space, into `out`; false when it cannot
 * be read as a 64-bit ELF file. */
static bool needed_libraries(const char *path, char *out, size_t size) {
  out[0] = '\0';
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0 || (size_t)st.st_size < sizeof(Elf64_Ehdr)) {
    if (fd >= 0) close(fd);
    return false;
  }
  const unsigned char *file = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (file == MAP_FAILED) return false;
  const Elf64_Ehdr *header = (const Elf64_Ehdr *)file;
  bool ok = memcmp(header->e_ident, ELFMAG, SELFMAG) == 0 && header->e_ident[EI_CLASS] == ELFCLASS64 &&
            header->e_shoff + (size_t)header->e_shnum * sizeof(Elf64_Shdr) <= (size_t)st.st_size;
  const Elf64_Shdr *sections = ok ? (const Elf64_Shdr *)(file + header->e_shoff) : NULL;
  for (int i = 0; ok && i < header->e_shnum; i++) {
    if (sections[i].sh_type != SHT_DYNAMIC || sections[i].sh_link >= header->e_shnum) continue;
    const Elf64_Shdr *strings = &sections[sections[i].sh_link];
    const Elf64_Dyn *entries = (const Elf64_Dyn *)(file + sections[i].sh_offset);
    for (size_t j = 0; j < sections[i].sh_size / sizeof(Elf64_Dyn) && entries[j].d_tag != DT_NULL; j++)
      if (entries[j].d_tag == DT_NEEDED && entries[j].d_un.d_val < strings->sh_size) {
        size_t used = strlen(out);
        snprintf(out + used, size - used, "%s ",
                 (const char *)(file + strings->sh_offset + entries[j].d_un.d_val));
      }
  }
  munmap((void *)file, (size_t)st.st_size);
  return ok;
}

static void programs_do_not_link_the_dlopen_libraries(void **state) {
  (void)state;
  /* the libraries of supervisor/dlopen, and what libnats pulls in */
  static const char *const unwanted[] = {"libnats.", "libssl.",    "libcrypto.",  "libprotobuf-c.",
                                         "libhs.",   "libstdc++.", "libnftables."};
  const char *const programs[] = {"dome", "domed"};
  for (size_t p = 0; p < sizeof programs / sizeof programs[0]; p++) {
    char path[PATH_MAX + 16], needed[4096];
    if (!build_program(programs[p], path, sizeof path)) {
      print_message("%s not built: not checked\n", programs[p]);
      continue;
    }
    assert_true(needed_libraries(path, needed, sizeof needed));
    assert_non_null(strstr(needed, "libc.so.6 ")); /* the reader found the dynamic section */
    for (size_t u = 0; u < sizeof unwanted / sizeof unwanted[0]; u++)
      if (strstr(needed, unwanted[u]) != NULL)
        fail_msg("%s links %s (NEEDED: %s)", path, unwanted[u], needed);
  }
}

/* In a child whose mount namespace shows an empty file at libnats' path: every kind of forwarder fails
 * cleanly (no crash), nats_GetLastError names the library, and `dome audit verify --fleet` exits with a
 * message naming it. Returns NULL, or what went wrong; "skip" when no mount namespace can be made. */
static const char *without_libnats(const char *library_path) {
  if (unshare(CLONE_NEWNS) < 0) {
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) return "skip";
    char map[64];
    int fd = open("/proc/self/setgroups", O_WRONLY);
    if (fd >= 0) (void)!write(fd, "deny", 4), close(fd);
    snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
    if ((fd = open("/proc/self/uid_map", O_WRONLY)) >= 0) (void)!write(fd, map, strlen(map)), close(fd);
    snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
    if ((fd = open("/proc/self/gid_map", O_WRONLY)) >= 0) (void)!write(fd, map, strlen(map)), close(fd);
  }
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
      mount("/dev/null", library_path, NULL, MS_BIND, NULL) < 0)
    return "skip";
  if (nats_mapped()) return "libnats was loaded before its first call";
  natsOptions *options = NULL;
  if (natsOptions_Create(&options) != NATS_FAILED_TO_INITIALIZE || options != NULL)
    return "natsOptions_Create did not fail";
  natsStatus last = NATS_OK;
  const char *text = nats_GetLastError(&last);
  if (last != NATS_FAILED_TO_INITIALIZE || text == NULL || strstr(text, NATS_SONAME) == NULL)
    return "nats_GetLastError does not name the library";
  if (strcmp(natsStatus_GetText(NATS_FAILED_TO_INITIALIZE), "Initialization Failed") != 0)
    return "natsStatus_GetText without the library";
  natsConnection *connection = NULL;
  if (natsConnection_Connect(&connection, NULL) != NATS_FAILED_TO_INITIALIZE || connection != NULL)
    return "natsConnection_Connect did not fail";
  kvStore *store = NULL;
  if (js_KeyValue(&store, NULL, "bucket") != NATS_FAILED_TO_INITIALIZE) return "js_KeyValue did not fail";
  jsOptions js_options;
  memset(&js_options, 0xa5, sizeof js_options);
  if (jsOptions_Init(&js_options) != NATS_FAILED_TO_INITIALIZE || js_options.Wait != 0)
    return "jsOptions_Init did not fail, or left the options unset";
  if (natsMsg_GetData(NULL) != NULL || kvEntry_Revision(NULL) != 0 || kvEntry_Operation(NULL) != kvOp_Unknown)
    return "a getter without the library";
  natsOptions_Destroy(NULL); /* no-ops, as with the library */
  natsConnection_Close(NULL);
  natsConnection_Destroy(NULL);
  kvEntry_Destroy(NULL);
  jsCtx_Destroy(NULL);

  char dome[PATH_MAX + 16];
  if (!build_program("dome", dome, sizeof dome)) return NULL; /* the CLI is checked when it is built */
  int out[2];
  if (pipe(out) < 0) return "pipe";
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDERR_FILENO);
    dup2(out[1], STDOUT_FILENO);
    execl(dome, "dome", "audit", "verify", "--fleet", "--fleet-url", "nats://127.0.0.1:1", (char *)NULL);
    _exit(127);
  }
  close(out[1]);
  static char said[4096];
  size_t used = 0;
  for (ssize_t n; used < sizeof said - 1 && (n = read(out[0], said + used, sizeof said - 1 - used)) > 0;)
    used += (size_t)n;
  said[used] = '\0';
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 127)
    return "dome audit verify --fleet without libnats: not a clean failure";
  if (strstr(said, "cannot load " NATS_SONAME) == NULL)
    return "dome audit verify --fleet without libnats: no message naming the library";
  return NULL;
}

static void nats_missing_library_fails_cleanly(void **state) {
  (void)state;
  assert_false(nats_mapped()); /* runs before anything here calls into libnats */
  /* where the loader finds libnats, from a child that loads it (this process must not) */
  int channel[2];
  assert_int_equal(pipe(channel), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    void *handle = dlopen(NATS_SONAME, RTLD_LAZY | RTLD_LOCAL);
    struct link_map *map = NULL;
    if (handle && dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map->l_name)
      (void)!write(channel[1], map->l_name, strlen(map->l_name));
    _exit(0);
  }
  close(channel[1]);
  char library_path[PATH_MAX] = "";
  ssize_t length = read(channel[0], library_path, sizeof library_path - 1);
  close(channel[0]);
  waitpid(pid, NULL, 0);
  assert_true(length > 0);
  library_path[length] = '\0';

  int report[2];
  assert_int_equal(pipe(report), 0);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* a crash ends the child (not cmocka's handlers, inherited, which would run the next tests in it) */
    const int crashes[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    for (size_t i = 0; i < sizeof crashes / sizeof crashes[0]; i++) signal(crashes[i], SIG_DFL);
    const char *problem = without_libnats(library_path);
    if (problem) (void)!write(report[1], problem, strlen(problem));
    _exit(0);
  }
  close(report[1]);
  char problem[256] = "";
  length = read(report[0], problem, sizeof problem - 1);
  close(report[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) /* a crash */
    fail_msg("the child without %s: %s %d", NATS_SONAME, WIFSIGNALED(status) ? "killed by signal" : "exit",
             WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  problem[length > 0 ? length : 0] = '\0';
  if (strcmp(problem, "skip") == 0) skip(); /* no mount namespace here */
  if (problem[0]) fail_msg("without %s (%s hidden): %s", NATS_SONAME, library_path, problem);
}

static void nats_loads_on_first_call(void **state) {
  (void)state;
  assert_false(nats_mapped()); /* the test program does not link it either */
  natsOptions *options = NULL;
  assert_int_equal(natsOptions_Create(&options), NATS_OK);
  assert_true(nats_mapped());
  assert_non_null(options);
  const char *servers[] = {"nats://127.0.0.1:1"}; /* nothing listens on port 1 */
  assert_int_equal(natsOptions_SetServers(options, servers, 1), NATS_OK);
  assert_int_equal(natsOptions_SetName(options, "test_dlopen"), NATS_OK);
  assert_int_equal(natsOptions_SetTimeout(options, 500), NATS_OK);
  assert_int_equal(natsOptions_SetMaxPingsOut(options, -1), NATS_OK); /* the library's own check answers */
  natsConnection *connection = NULL;
  assert_int_equal(natsConnection_Connect(&connection, options), NATS_NO_SERVER);
  assert_null(connection);
  natsStatus last = NATS_OK;
  const char *text = nats_GetLastError(&last);
  assert_int_equal(last, NATS_NO_SERVER);
  assert_non_null(strstr(text, "No server available"));
  assert_string_equal(natsStatus_GetText(NATS_TIMEOUT), "Timeout");
  natsOptions_Destroy(options);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(missing_library_fails_and_stays_failed),
      cmocka_unit_test(missing_symbol_fails),
      cmocka_unit_test(present_library_resolves),
      cmocka_unit_test(vectorscan_forwarders_work),
      cmocka_unit_test(nftables_forwarders_work),
      cmocka_unit_test(programs_do_not_link_the_dlopen_libraries),
      cmocka_unit_test(nats_missing_library_fails_cleanly), /* before libnats is loaded here */
      cmocka_unit_test(nats_loads_on_first_call)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
