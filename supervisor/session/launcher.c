/* The program of a session's jail and the client of its process runner (see session.h). */
#include <errno.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/session/session.h"

/* Runs as the jail's program (pid 2), and becomes the kernel: one interpreter, not a launcher beside it.
 * It waits for the connection file (domed writes it into SESSION_SOCKET_DIR, which the launcher makes),
 * serves the process runner from a thread, imports ipykernel and runs the kernel in its main thread; the jail
 * ends when the kernel exits. pid 2 leads its own process group (the jail gives its program a new session),
 * so the kernel's interrupt (ipykernel signals its own group) reaches the cell's processes; each runner
 * process gets a group of its own, which neither the interrupt reaches nor outlives its timeout. Left out of
 * the kernel, because a session does not use them and they cost start-up time: its debugger (debugpy: it
 * would listen on a TCP port, which the jail's kernel rules refuse), jedi (IPython completes without it),
 * IPython's terminal front end (prompt_toolkit; IPython imports it only for `embed`), the history database
 * (sqlite; execution counts do not need it), and its IOPub pipe for forked processes' output (a TCP socket on
 * 127.0.0.1: ZeroMQ's address resolution asks for the interfaces over netlink, which the jail's seccomp
 * filter refuses, and ZeroMQ aborts on that refusal). The start-up marks (CLOCK_REALTIME seconds: start,
 * runner, imported) go to SESSION_SOCKET_DIR/phases.json just before the kernel starts. */
/* The imports of the launcher, the part that needs nothing of a call (see session.h): a prepared session
 * jail runs it before its call (session_launcher_preload); the launcher runs it again, which leaves what the
 * preload did (its stubs, its modules) as they are. */
#define SESSION_LAUNCHER_PRELOAD                                                                   \
  "import sys, types\n"                                                                            \
  "if 'ipykernel.kernelapp' not in sys.modules:\n"                                                 \
  "    sys.modules['debugpy'] = None\n"                                                            \
  "    sys.modules['jedi'] = None\n"                                                               \
  "    embed = types.ModuleType('IPython.terminal.embed')\n"                                       \
  "    def no_terminal(*args, **kwargs): raise RuntimeError('no terminal in a sandbox session')\n" \
  "    embed.embed = embed.InteractiveShellEmbed = no_terminal\n"                                  \
  "    sys.modules['IPython.terminal.embed'] = embed\n"                                            \
  "from ipykernel import iostream, kernelapp\n"                                                    \
  "iostream.IOPubThread._setup_pipe_in = lambda self: setattr(self, '_pipe_flag', False)\n"

const char session_launcher_preload[] = SESSION_LAUNCHER_PRELOAD;

char *session_launcher_program(const char *bootstrap) {
  static const char head[] =
      "import sys, time\n"
      "import os\n"
      "#dome: a prepared interpreter waiting for its call\n"
      "try:\n"
      "    os.fstat(3), os.fstat(4)\n"
      "    prepared = True\n"
      "except OSError:\n"
      "    prepared = False\n"
      "if prepared:\n"
      "    exec(bytes.fromhex('";
  static const char tail[] =
      "').decode())\n"
      "    sys.exit()\n";
  size_t inner = strlen(session_launcher_preload) + strlen(bootstrap);
  size_t size = sizeof head - 1 + 2 * inner + sizeof tail - 1 + strlen(session_launcher_source) + 1;
  char *program = malloc(size);
  if (program == NULL) return NULL;
  char *at = program;
  at = stpcpy(at, head);
  static const char digits[] = "0123456789abcdef";
  for (int part = 0; part < 2; part++)
    for (const unsigned char *c = (const unsigned char *)(part ? bootstrap : session_launcher_preload); *c;
         c++) {
      *at++ = digits[*c >> 4];
      *at++ = digits[*c & 15];
    }
  at = stpcpy(at, tail);
  stpcpy(at, session_launcher_source);
  return program;
}

const char session_launcher_source[] =
    "import sys, time\n"
    "marks = {'start': time.time()}\n"
    "import json, os, select, signal, socket, subprocess, threading, types\n"
    "D = '" SESSION_SOCKET_DIR
    "'\n"
    "os.makedirs(D, mode=0o700, exist_ok=True)\n"
    "while not os.path.exists(D + '/connection.json'): time.sleep(0.002)\n"
    "os.chdir('/workspace')\n"
    /* the process's output is read in the serving thread itself: once the cell's process runs, a fork bomb
     * can hold every pid of the jail's cgroup, so no thread may have to start after it (one that could not
     * failed the call and left the bomb running) */
    "def end(p):\n"
    "    try: os.killpg(p.pid, signal.SIGKILL)\n"
    "    except OSError: pass\n"
    "    p.wait()\n"
    "def serve(c):\n"
    "    p = None\n"
    "    try:\n"
    "        request = json.loads(c.makefile('rb').readline())\n"
    "        limit = int(request.get('output_bytes', 1 << 20))\n"
    "        start = time.monotonic()\n"
    "        deadline = start + request.get('timeout_ms', 10000) / 1000\n"
    "        p = subprocess.Popen(request['argv'], cwd='/workspace', stdin=subprocess.DEVNULL,\n"
    "                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)\n"
    "        try: exited = os.pidfd_open(p.pid)\n"
    "        except (AttributeError, OSError): exited = None\n"
    "        buffers = {p.stdout.fileno(): bytearray(), p.stderr.fileno(): bytearray()}\n"
    "        streams, flags = set(buffers), {'truncated': False}\n"
    "        def take(fd):\n"
    "            chunk = os.read(fd, 65536)\n"
    "            if not chunk: streams.discard(fd); return\n"
    "            room = limit - len(buffers[fd])\n"
    "            if room > 0: buffers[fd] += chunk[:room]\n"
    "            if len(chunk) > room: flags['truncated'] = True\n"
    "        timed_out = cancelled = False\n"
    "        while p.poll() is None:\n"
    "            left = deadline - time.monotonic()\n"
    "            if left <= 0: timed_out = True; break\n"
    "            waited = [c, *streams] + ([exited] if exited is not None else [])\n"
    "            ready = select.select(waited, [], [], left if exited is not None else min(0.05, left))[0]\n"
    "            if c in ready: cancelled = True; break\n"
    "            for fd in ready:\n"
    "                if fd in streams: take(fd)\n"
    "        end(p)\n"
    "        if exited is not None: os.close(exited)\n"
    "        drained = time.monotonic() + 1\n"
    "        while streams and time.monotonic() < drained:\n"
    "            for fd in select.select(list(streams), [], [], max(0, drained - time.monotonic()))[0]: "
    "take(fd)\n"
    "        code = p.returncode\n"
    "        answer = {'stdout': buffers[p.stdout.fileno()].decode('utf-8', 'replace'),\n"
    "                  'stderr': buffers[p.stderr.fileno()].decode('utf-8', 'replace'),\n"
    "                  'exit_code': code if code >= 0 else 128 - code, 'signal': -code if code < 0 else 0,\n"
    "                  'timed_out': timed_out, 'cancelled': cancelled, 'truncated': flags['truncated'],\n"
    "                  'duration_ms': int((time.monotonic() - start) * 1000)}\n"
    "        c.sendall(json.dumps(answer).encode() + b'\\n')\n"
    "    except Exception as e:\n"
    "        if p is not None: end(p)\n"
    "        try: c.sendall(json.dumps({'error': str(e)}).encode() + b'\\n')\n"
    "        except OSError: pass\n"
    "    finally:\n"
    "        if p is not None:\n"
    "            for stream in (p.stdout, p.stderr): stream.close()\n"
    "        c.close()\n"
    "def accept(server):\n"
    "    while True:\n"
    "        c, _ = server.accept()\n"
    "        try: threading.Thread(target=serve, args=(c,), daemon=True).start()\n"
    "        except RuntimeError as e:\n"
    "            try: c.sendall(json.dumps({'error': str(e)}).encode() + b'\\n')\n"
    "            except OSError: pass\n"
    "            c.close()\n"
    "server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)\n"
    "server.bind(D + '/run')\n"
    "server.listen(16)\n"
    "threading.Thread(target=accept, args=(server,), daemon=True).start()\n"
    "marks['runner'] = time.time()\n" SESSION_LAUNCHER_PRELOAD
    "marks['imported'] = time.time()\n"
    "with open(D + '/phases.json', 'w') as f: json.dump(marks, f)\n"
    "sys.argv = ['ipykernel']\n"
    "kernelapp.launch_new_instance(['-f', D + '/connection.json', '--HistoryManager.enabled=False'])\n";

json_t *session_launcher_env(void) {
  /* Debian's matplotlib looks for its matplotlibrc in /etc, which the host-ro image does not lay out */
  return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "MATPLOTLIBRC",
                   "/usr/share/matplotlib/mpl-data/matplotlibrc", "IPYTHONDIR", "/tmp/.ipython",
                   "MPLCONFIGDIR", "/tmp/.matplotlib", "JUPYTER_RUNTIME_DIR", "/tmp/.jupyter/runtime",
                   "JUPYTER_DATA_DIR", "/tmp/.jupyter/data", "JUPYTER_CONFIG_DIR", "/tmp/.jupyter/config",
                   "PYTHONDONTWRITEBYTECODE", "1");
}

char *session_connection_file(char key[65]) {
  unsigned char bytes[32];
  randombytes_buf(bytes, sizeof bytes);
  sodium_bin2hex(key, 65, bytes, sizeof bytes);
  sodium_memzero(bytes, sizeof bytes);
  json_t *file = json_pack("{s:s,s:s,s:i,s:i,s:i,s:i,s:i,s:s,s:s,s:s}", "transport", "ipc", "ip",
                           SESSION_SOCKET_DIR "/kernel", "shell_port", 1, "iopub_port", 2, "stdin_port", 3,
                           "control_port", 4, "hb_port", 5, "key", key, "signature_scheme", "hmac-sha256",
                           "kernel_name", "python3");
  char *text = file ? json_dumps(file, JSON_COMPACT) : NULL;
  json_decref(file);
  return text;
}

static bool readable(int fd) {
  if (fd < 0) return false;
  struct pollfd p = {.fd = fd, .events = POLLIN};
  return poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP));
}

int session_run_process(const char *socket_path, char *const *argv, uint64_t timeout_ms, int cancel_fd,
                        size_t output_bytes, json_t **result, dome_error *err) {
  *result = NULL;
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  if (strlen(socket_path) >= sizeof address.sun_path)
    return dome_error_set(err, ENAMETOOLONG, "runner socket `%s`", socket_path);
  memcpy(address.sun_path, socket_path, strlen(socket_path) + 1);
  _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return dome_error_set_errno(err, errno, "socket");
  if (connect(fd, (struct sockaddr *)&address, sizeof address) < 0)
    return dome_error_set_errno(err, errno, "the session's process runner");
  json_t *args = json_array();
  for (size_t i = 0; argv[i]; i++) json_array_append_new(args, json_string(argv[i]));
  json_t *request = json_pack("{s:o,s:I,s:I}", "argv", args, "timeout_ms", (json_int_t)timeout_ms,
                              "output_bytes", (json_int_t)(output_bytes ? output_bytes : (1u << 20)));
  char *line = request ? json_dumps(request, JSON_COMPACT) : NULL;
  json_decref(request);
  if (line == NULL) return dome_error_set(err, ENOMEM, "runner request");
  size_t length = strlen(line);
  line[length] = '\n'; /* json_dumps' NUL becomes the line's end */
  ssize_t sent = send(fd, line, length + 1, MSG_NOSIGNAL);
  free(line);
  if (sent != (ssize_t)(length + 1)) return dome_error_set_errno(err, errno ? errno : EIO, "runner request");
  /* the answer holds both streams JSON-escaped (up to 6 bytes a byte) */
  size_t limit = 12 * (output_bytes ? output_bytes : (1u << 20)) + 65536, used = 0;
  _cleanup_free_ char *answer = malloc(65536);
  size_t size = 65536;
  if (answer == NULL) return dome_error_set(err, ENOMEM, "runner answer");
  uint64_t give_up = session_monotonic_ms() + timeout_ms + 5000;
  bool cancel_sent = false;
  for (;;) {
    if (!cancel_sent && readable(cancel_fd)) {
      shutdown(fd, SHUT_WR); /* the runner sees its peer end: it kills the process and answers */
      cancel_sent = true;
    }
    uint64_t now = session_monotonic_ms();
    if (now >= give_up) return dome_error_set(err, ETIMEDOUT, "the session's process runner did not answer");
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = poll(&p, 1, 50);
    if (n < 0 && errno != EINTR) return dome_error_set_errno(err, errno, "poll");
    if (n <= 0) continue;
    if (used + 1 >= size) {
      if (size >= limit) return dome_error_set(err, EPROTO, "runner answer over %zu bytes", limit);
      char *grown = realloc(answer, size * 2);
      if (grown == NULL) return dome_error_set(err, ENOMEM, "runner answer");
      answer = grown;
      size *= 2;
    }
    ssize_t got = recv(fd, answer + used, size - used - 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return dome_error_set_errno(err, errno, "runner answer");
    if (got == 0) break;
    used += (size_t)got;
    if (answer[used - 1] == '\n') break;
  }
  json_error_t parse;
  json_t *value = json_loadb(answer, used, 0, &parse);
  if (!json_is_object(value) || json_object_get(value, "error")) {
    int rc = dome_error_set(
        err, EPROTO, "the session's process runner: %s",
        json_is_object(value) ? json_string_value(json_object_get(value, "error")) : "no answer");
    json_decref(value);
    return rc;
  }
  *result = value;
  return 0;
}

uint64_t session_monotonic_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t session_realtime_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}
