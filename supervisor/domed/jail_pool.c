/* Warm jails: prepared, single-use jails (supervisor/jail's jail_prepare) kept ready per limits class, so
 * that an execute_code call only binds one to its agent (limits read back, kernel rules attached, Landlock,
 * environment, program) instead of building it. A class is the shape of a jail: domed's image and the
 * capability's memory, pids, cpus and workspace size, and whether its jails start a Python interpreter
 * for `python -c` calls (the interpreter then waits for the code, see jail_prepared_run); up to POOL_CLASSES
 * classes, the least recently used one giving way to a new shape; the default quota's shape is warmed from
 * the start.
 *
 * - One refill thread prepares jails for every class below `pool_size`, most recently used first, at nice
 *   REFILL_NICE so that it yields the CPU to the calls (jail_prepared_run gives the bound jail the
 *   calling thread's priority). It also waits while one-shot calls run and until REFILL_QUIET_MS after
 *   the last one ended, up to REFILL_DEFER_MS: preparing a jail takes the kernel's cgroup lock that the
 *   call's own binding takes too, and a Python interpreter's start takes a core of a small machine, so a
 *   refill beside a call slows that call (docs/architecture.md, "The refill yields to the calls"; a
 *   session's launch does not count: it runs for the session's life). It is
 *   also the thread every prepared jail's child is tied to (the kernel's parent-death signal follows the
 *   creating thread), so it ends only after the last jail taken from the pool has finished.
 * - A call takes a ready jail of its class or, when there is none (a burst beyond the pool, a class not
 *   seen yet, a call whose jail needs an egress path or a resolver), runs in a fresh jail at once: it
 *   never waits for the refill.
 * - Every administrative change (rules, quotas, agents, tools: domed_jail_pool_invalidate) and a change of
 *   the active rules version make the jails prepared before it stale: they are discarded, never used.
 * - A jail that does not fit or no longer waits is discarded by jail_prepared_run and the call runs fresh.
 * - domed_jail_pool_stop (SIGTERM) discards every ready jail and joins the thread: nothing is left.
 * - Session classes (shape.session, `session_pool_size` each): jails whose interpreter runs the session's
 *   program (domed_session_program) and has imported ipykernel before any call; a class is made by the
 *   first create_session of its shape. A session takes one only when it fits exactly (session_call: the
 *   launcher's environment, Landlock rules that read the whole image, no egress path); its hit counts when
 *   taken, since the jail then runs for the session's life. Each ready jail serves only calls of the rules
 *   version active when it was prepared. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "supervisor/common/deadline.h"
#include "supervisor/domed/domed.h"
#include "supervisor/exec/exec.h"
#include "supervisor/jail/jail.h"
#include "supervisor/session/session.h"

#define POOL_CLASSES 6
#define REFILL_NICE 10
#define REFILL_DEFER_MS 250 /* longest wait of the refill for the calls to pause */
#define REFILL_QUIET_MS 20  /* the pause after the last call's end that the refill waits for */

struct pool_class {
  bool used;
  struct {
    char image[64];
    uint64_t memory_bytes, workspace_bytes;
    uint32_t pids;
    double cpus;
    bool python;  /* its jails start a Python interpreter (jail_config.prepared_python) */
    bool session; /* and that interpreter is a session's kernel imported (domed_session_program) */
  } shape;
  uint64_t last_used;
  int rules_version; /* of the last call: a change discards the class's jails */
  struct jail_prepared *ready[DOMED_POOL_SIZE_MAX];
  uint64_t generation[DOMED_POOL_SIZE_MAX];    /* pool generation each ready jail was prepared in */
  int jail_rules_version[DOMED_POOL_SIZE_MAX]; /* the active rules version when it was prepared */
  unsigned count;
};

struct domed_jail_pool {
  struct domed *domed;
  pthread_mutex_t lock;
  pthread_cond_t wake; /* the refill has work, or stop */
  pthread_cond_t idle; /* a taken jail finished */
  pthread_t thread;
  bool stopping;
  unsigned size;         /* pool_size: ready jails kept per class */
  unsigned session_size; /* session_pool_size: ready jails kept per session class */
  char **session_env;    /* a session launcher's environment (the base, then session_launcher_env) */
  uint64_t generation;
  uint64_t clock;
  unsigned in_use;           /* taken jails still running */
  unsigned calls_running;    /* one-shot calls in domed_jail_pool_run, pooled or fresh */
  uint64_t last_call_end_us; /* when the last of them ended (domed_now_us) */
  struct pool_class classes[POOL_CLASSES];
  atomic_uint_fast64_t hits, interpreter_hits, misses, discards, refills, refill_failures, refill_us;
  atomic_uint_fast64_t session_hits, session_misses;
};

/* Ready jails wanted for class `c`. */
static unsigned target_of(const struct domed_jail_pool *pool, const struct pool_class *c) {
  return c->shape.session ? pool->session_size : pool->size;
}

/* Do the call's Landlock rules let it read the whole image (a rule granting read beneath "/", as the
 * baseline does)? A prepared session jail imported its modules before Landlock: it may serve only an agent
 * that could read every file those imports read, so that nothing is loaded it could not load itself. */
static bool reads_everything(const struct jail_config *config) {
  if (config->path_rules == NULL) return true;
  for (size_t i = 0; i < config->path_rule_count; i++) {
    const struct jail_path_rule *rule = &config->path_rules[i];
    /* optional or not ("/" is always there), but beneath, not the directory alone */
    if (rule->path && strcmp(rule->path, "/") == 0 && (rule->access & JAIL_ACCESS_READ) && !rule->exact)
      return true;
  }
  return false;
}

/* Is `config` a session's launcher that a prepared session jail can serve exactly as a fresh jail
 * (execute.c's run_jail names the program): its interpreter, `-c` with no stdin, and an environment that
 * is exactly the one such a jail's interpreter starts with (no secrets, no variables of the agent), and
 * Landlock rules that read the whole image. */
static bool session_call(const struct domed_jail_pool *pool, const struct jail_config *config) {
  const char *program = domed_session_program();
  return pool->session_env && program && config->prepared_python_program &&
         strcmp(config->prepared_python_program, program) == 0 && reads_everything(config) &&
         jail_python_call_fits(exec_interpreter("python"), pool->session_env, config);
}

/* The base environment and then the launcher's, as "KEY=VALUE" strings (NULL-terminated, malloc'd). */
static char **session_environment(void) {
  json_t *env = session_launcher_env();
  size_t base = 0;
  while (exec_base_environment[base]) base++;
  char **list = env ? calloc(base + json_object_size(env) + 1, sizeof *list) : NULL;
  size_t count = 0;
  bool ok = list != NULL;
  for (size_t i = 0; ok && i < base; i++) ok = (list[count++] = strdup(exec_base_environment[i])) != NULL;
  const char *key;
  json_t *value;
  json_object_foreach(env, key, value) {
    if (!ok) break;
    ok = asprintf(&list[count], "%s=%s", key, json_string_value(value)) >= 0;
    if (ok)
      count++;
    else
      list[count] = NULL;
  }
  json_decref(env);
  if (!ok && list) {
    for (size_t i = 0; i < count; i++) free(list[i]);
    free(list);
    return NULL;
  }
  return list;
}

static void session_environment_free(char **list) {
  for (size_t i = 0; list && list[i]; i++) free(list[i]);
  free(list);
}

/* Would a Python interpreter started in advance serve this call as a fresh one would (jail.h,
 * jail_python_call_fits): started with the pipeline's base environment, it serves `python -c` calls whose
 * start-up variables are those of the base (the secrets and the agent's own variables come with the
 * call). */
static bool python_call(const struct jail_config *config) {
  return jail_python_call_fits(exec_interpreter("python"), exec_base_environment, config);
}

static void shape_fill(struct pool_class *c, const struct jail_config *config, bool python, bool session) {
  c->shape.python = python;
  c->shape.session = session;
  snprintf(c->shape.image, sizeof c->shape.image, "%s", config->image ? config->image : JAIL_DEFAULT_IMAGE);
  c->shape.memory_bytes = config->memory_bytes ? config->memory_bytes : JAIL_DEFAULT_MEMORY_BYTES;
  c->shape.workspace_bytes = config->workspace_bytes ? config->workspace_bytes : JAIL_DEFAULT_WORKSPACE_BYTES;
  c->shape.pids = config->pids ? config->pids : JAIL_DEFAULT_PIDS;
  c->shape.cpus = config->cpus > 0 ? config->cpus : JAIL_DEFAULT_CPUS;
}

static bool shape_matches(const struct pool_class *c, const struct jail_config *config, bool python,
                          bool session) {
  struct pool_class probe;
  shape_fill(&probe, config, python, session);
  return c->used && c->shape.python == python && c->shape.session == session &&
         strcmp(c->shape.image, probe.shape.image) == 0 &&
         c->shape.memory_bytes == probe.shape.memory_bytes &&
         c->shape.workspace_bytes == probe.shape.workspace_bytes && c->shape.pids == probe.shape.pids &&
         c->shape.cpus == probe.shape.cpus;
}

static void shape_config(const struct domed_jail_pool *pool, const struct pool_class *c,
                         struct jail_config *config) {
  jail_config_init(config);
  config->image = c->shape.image;
  config->memory_bytes = c->shape.memory_bytes;
  config->workspace_bytes = c->shape.workspace_bytes;
  config->pids = c->shape.pids;
  config->cpus = c->shape.cpus;
  if (c->shape.python) {
    config->prepared_python = exec_interpreter("python");
    config->env = exec_base_environment;
  }
  if (c->shape.session) {
    config->env = pool->session_env;
    config->prepared_python_program = domed_session_program();
  }
}

/* Move every ready jail of `c` to `out` (at *count); the caller discards them outside the lock. */
static void empty_class(struct pool_class *c, struct jail_prepared **out, size_t *count) {
  for (unsigned i = 0; i < c->count; i++) out[(*count)++] = c->ready[i];
  c->count = 0;
}

/* The id of a prepared jail's cgroup2 leaf, 0 when it has none. */
static uint64_t leaf_id(const struct jail_prepared *prepared) {
  struct jail_cgroup leaf;
  return jail_prepared_cgroup(prepared, &leaf) == 0 ? leaf.id : 0;
}

static void discard_all(struct domed_jail_pool *pool, struct jail_prepared **list, size_t count) {
  for (size_t i = 0; i < count; i++) {
    domed_kernel_prelink_drop(pool->domed, leaf_id(list[i]));
    jail_prepared_discard(list[i]);
  }
  atomic_fetch_add(&pool->discards, count);
}

/* Attach the kernel programs to a new prepared jail's leaf, off the call's path (domed_kernel_prelink).
 * Not fatal: without it the call attaches them itself, as a fresh jail's does. */
static void prelink(struct domed_jail_pool *pool, struct jail_prepared *prepared) {
  struct jail_cgroup leaf;
  dome_error err = {0};
  if (jail_prepared_cgroup(prepared, &leaf) == 0 && domed_kernel_prelink(pool->domed, &leaf, &err) < 0)
    domed_log("warn", "jail_pool", "msg=\"kernel programs attach at the call instead\" error=\"%s\"",
              err.message);
}

/* The class most in need of a jail (used, below size, most recently used), or NULL. Lock held. */
static struct pool_class *class_to_refill(struct domed_jail_pool *pool) {
  struct pool_class *best = NULL;
  for (size_t i = 0; i < POOL_CLASSES; i++) {
    struct pool_class *c = &pool->classes[i];
    if (c->used && c->count < target_of(pool, c) && (best == NULL || c->last_used > best->last_used))
      best = c;
  }
  return best;
}

/* Whether this process may raise a priority again (CAP_SYS_NICE effective). */
static bool may_raise_priority(void) {
  cap_t caps = cap_get_proc();
  cap_flag_value_t value = CAP_CLEAR;
  if (caps) cap_get_flag(caps, CAP_SYS_NICE, CAP_EFFECTIVE, &value);
  cap_free(caps);
  return value == CAP_SET;
}

static void *refill_main(void *context) {
  struct domed_jail_pool *pool = context;
  /* background work: preparing yields the CPU to the calls (a bound jail gets its caller's priority
   * back, which takes CAP_SYS_NICE: without it the refill keeps the calls' priority) */
  if (!may_raise_priority())
    domed_log("info", "jail_pool", "msg=\"refill runs at the calls' priority: no CAP_SYS_NICE\"");
  else if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), REFILL_NICE) < 0)
    domed_log("warn", "jail_pool", "msg=\"refill runs at the calls' priority\" errno=%d", errno);
  bool failing = false;
  uint64_t deferred_since_us = 0; /* when the refill began to wait for running calls, or 0 */
  pthread_mutex_lock(&pool->lock);
  while (!pool->stopping) {
    struct pool_class *c = class_to_refill(pool);
    if (c == NULL) {
      deferred_since_us = 0;
      pthread_cond_wait(&pool->wake, &pool->lock);
      continue;
    }
    uint64_t now = domed_now_us();
    if (pool->calls_running > 0 || now - pool->last_call_end_us < REFILL_QUIET_MS * 1000ull) {
      if (deferred_since_us == 0) deferred_since_us = now;
      uint64_t cap = deferred_since_us + REFILL_DEFER_MS * 1000ull;
      if (now < cap) {
        uint64_t quiet = pool->last_call_end_us + REFILL_QUIET_MS * 1000ull;
        uint64_t wake_at = pool->calls_running == 0 && quiet < cap ? quiet : cap;
        /* rounded up to whole ms, so that it does not wake before and spin */
        struct timespec until = dome_deadline_after_ms((unsigned)((wake_at - now + 999) / 1000));
        pthread_cond_timedwait(&pool->idle, &pool->lock, &until);
        continue;
      }
    }
    deferred_since_us = 0;
    struct pool_class wanted = *c;
    uint64_t generation = pool->generation;
    pthread_mutex_unlock(&pool->lock);
    struct domed_rules *active = domed_rules_acquire(pool->domed);
    int version = active ? active->version : 0;
    domed_rules_release(active);
    struct jail_config shape;
    shape_config(pool, &wanted, &shape);
    struct jail_prepared *prepared = NULL;
    dome_error err = {0};
    uint64_t start = domed_now_us();
    int rc = jail_prepare(&shape, &prepared, &err);
    if (rc == 0) prelink(pool, prepared);
    atomic_fetch_add(&pool->refill_us, domed_now_us() - start);
    if (rc < 0) {
      atomic_fetch_add(&pool->refill_failures, 1);
      if (!failing)
        domed_log("warn", "jail_pool", "msg=\"cannot prepare a jail; calls run in fresh jails\" error=\"%s\"",
                  err.message);
      failing = true;
    } else {
      failing = false;
      atomic_fetch_add(&pool->refills, 1);
    }
    pthread_mutex_lock(&pool->lock);
    if (rc < 0) {
      /* do not spin on a host that refuses: try again in a second or when woken */
      struct timespec until = dome_deadline_after_ms(1000);
      if (!pool->stopping) pthread_cond_timedwait(&pool->wake, &pool->lock, &until);
      continue;
    }
    /* the class may have been replaced, or the pool invalidated, while we prepared */
    bool keep = !pool->stopping && generation == pool->generation && c->used &&
                c->shape.python == wanted.shape.python && c->shape.session == wanted.shape.session &&
                strcmp(c->shape.image, wanted.shape.image) == 0 &&
                c->shape.memory_bytes == wanted.shape.memory_bytes &&
                c->shape.workspace_bytes == wanted.shape.workspace_bytes &&
                c->shape.pids == wanted.shape.pids && c->shape.cpus == wanted.shape.cpus &&
                c->count < target_of(pool, c);
    if (keep) {
      c->ready[c->count] = prepared;
      c->generation[c->count] = generation;
      c->jail_rules_version[c->count] = version;
      c->count++;
      continue;
    }
    pthread_mutex_unlock(&pool->lock);
    discard_all(pool, &prepared, 1);
    pthread_mutex_lock(&pool->lock);
  }
  struct jail_prepared *left[POOL_CLASSES * DOMED_POOL_SIZE_MAX];
  size_t count = 0;
  for (size_t i = 0; i < POOL_CLASSES; i++) empty_class(&pool->classes[i], left, &count);
  pthread_mutex_unlock(&pool->lock);
  discard_all(pool, left, count);
  /* the jails taken from the pool are tied to this thread: end only after the last has finished */
  pthread_mutex_lock(&pool->lock);
  while (pool->in_use > 0) pthread_cond_wait(&pool->idle, &pool->lock);
  pthread_mutex_unlock(&pool->lock);
  return NULL;
}

int domed_jail_pool_start(struct domed *domed, dome_error *err) {
  domed->jail_pool = NULL;
  if (domed->config.pool_size == 0 && domed->config.session_pool_size == 0) return 0;
  struct domed_jail_pool *pool = calloc(1, sizeof *pool);
  if (pool == NULL) return dome_error_set(err, ENOMEM, "jail pool: out of memory");
  pool->domed = domed;
  pool->size = domed->config.pool_size;
  pool->session_size = domed->config.session_pool_size;
  if (pool->session_size > 0 && (pool->session_env = session_environment()) == NULL) {
    free(pool);
    return dome_error_set(err, ENOMEM, "jail pool: out of memory");
  }
  /* warm from the start for the default quota's shape (a capability without limits of its own) */
  struct jail_config shape;
  jail_config_init(&shape);
  shape.image = domed->config.image;
  /* and its Python interpreters, the language most calls use */
  struct domed_rules *rules = domed_rules_acquire(domed);
  for (size_t i = 0; i < 2 && pool->size > 0; i++) {
    pool->classes[i].used = true;
    shape_fill(&pool->classes[i], &shape, i == 1, false);
    pool->classes[i].rules_version = rules ? rules->version : 0;
    pool->classes[i].last_used = i; /* the interpreters are refilled first */
  }
  domed_rules_release(rules);
  pthread_mutex_init(&pool->lock, NULL);
  pthread_cond_init(&pool->wake, NULL);
  pthread_cond_init(&pool->idle, NULL);
  int rc = pthread_create(&pool->thread, NULL, refill_main, pool);
  if (rc != 0) {
    session_environment_free(pool->session_env);
    free(pool);
    return dome_error_set_errno(err, rc, "jail pool: start the refill thread");
  }
  domed->jail_pool = pool;
  return 0;
}

void domed_jail_pool_stop(struct domed *domed) {
  struct domed_jail_pool *pool = domed->jail_pool;
  if (pool == NULL) return;
  pthread_mutex_lock(&pool->lock);
  pool->stopping = true;
  pthread_cond_broadcast(&pool->wake);
  pthread_cond_broadcast(&pool->idle);
  pthread_mutex_unlock(&pool->lock);
  pthread_join(pool->thread, NULL);
  domed_log("info", "jail_pool",
            "msg=drained hits=%llu misses=%llu discards=%llu refills=%llu session_hits=%llu "
            "session_misses=%llu",
            (unsigned long long)atomic_load(&pool->hits), (unsigned long long)atomic_load(&pool->misses),
            (unsigned long long)atomic_load(&pool->discards), (unsigned long long)atomic_load(&pool->refills),
            (unsigned long long)atomic_load(&pool->session_hits),
            (unsigned long long)atomic_load(&pool->session_misses));
  session_environment_free(pool->session_env);
  pthread_cond_destroy(&pool->wake);
  pthread_cond_destroy(&pool->idle);
  pthread_mutex_destroy(&pool->lock);
  free(pool);
  domed->jail_pool = NULL;
}

void domed_jail_pool_invalidate(struct domed *domed) {
  struct domed_jail_pool *pool = domed->jail_pool;
  if (pool == NULL) return;
  struct jail_prepared *stale[POOL_CLASSES * DOMED_POOL_SIZE_MAX];
  size_t count = 0;
  pthread_mutex_lock(&pool->lock);
  pool->generation++;
  for (size_t i = 0; i < POOL_CLASSES; i++) empty_class(&pool->classes[i], stale, &count);
  pthread_cond_signal(&pool->wake);
  pthread_mutex_unlock(&pool->lock);
  discard_all(pool, stale, count);
}

static int run_call(struct domed_jail_pool *pool, int rules_version, bool session,
                    const struct jail_config *config, struct jail_result *result, dome_error *err);

int domed_jail_pool_run(struct domed *domed, int rules_version, const struct jail_config *config,
                        struct jail_result *result, dome_error *err) {
  struct domed_jail_pool *pool = domed->jail_pool;
  if (pool == NULL) return jail_run(config, result, err);
  /* a session's launcher; its launch runs for the session's life: the refill does not wait for it */
  bool session = config->prepared_python_program != NULL;
  if (!session) {
    pthread_mutex_lock(&pool->lock);
    pool->calls_running++;
    pthread_mutex_unlock(&pool->lock);
  }
  int rc = run_call(pool, rules_version, session, config, result, err);
  if (!session) {
    pthread_mutex_lock(&pool->lock);
    pool->calls_running--;
    pool->last_call_end_us = domed_now_us();
    pthread_cond_broadcast(&pool->idle);
    pthread_mutex_unlock(&pool->lock);
  }
  return rc;
}

/* domed_jail_pool_run's call: a ready jail of its class, or a fresh one. */
static int run_call(struct domed_jail_pool *pool, int rules_version, bool session,
                    const struct jail_config *config, struct jail_result *result, dome_error *err) {
  /* A jail with an egress path needs its network namespace at clone time; a resolver changes its /etc. */
  if ((config->on_namespaces_ready && !config->namespaces_hook_late) || config->resolv_conf ||
      config->hosts_dns)
    return jail_run(config, result, err);
  /* a session's launcher takes a prepared session jail or a fresh one (never a one-shot class) */
  if (session && !session_call(pool, config)) {
    domed_log("info", "jail_pool",
              "msg=\"a prepared session jail cannot serve this session: a fresh jail\" reads_image=%d "
              "environment_fits=%d",
              reads_everything(config),
              jail_python_call_fits(exec_interpreter("python"), pool->session_env, config));
    atomic_fetch_add(&pool->session_misses, 1);
    return jail_run(config, result, err);
  }
  if (!session && config->namespaces_hook_late) return jail_run(config, result, err);
  if ((session ? pool->session_size : pool->size) == 0) return jail_run(config, result, err);
  struct jail_prepared *stale[DOMED_POOL_SIZE_MAX + 1];
  size_t stale_count = 0;
  struct jail_prepared *prepared = NULL;
  bool python = session || python_call(config);
  pthread_mutex_lock(&pool->lock);
  struct pool_class *c = NULL;
  for (size_t i = 0; i < POOL_CLASSES && c == NULL; i++)
    if (shape_matches(&pool->classes[i], config, python, session)) c = &pool->classes[i];
  if (c == NULL && !pool->stopping) {
    /* a new shape takes a free class, else the least recently used one's place */
    c = &pool->classes[0];
    for (size_t i = 0; i < POOL_CLASSES; i++) {
      if (!pool->classes[i].used) {
        c = &pool->classes[i];
        break;
      }
      if (pool->classes[i].last_used < c->last_used) c = &pool->classes[i];
    }
    empty_class(c, stale, &stale_count);
    memset(c, 0, sizeof *c);
    c->used = true;
    shape_fill(c, config, python, session);
    c->rules_version = rules_version;
  }
  if (c) {
    c->last_used = ++pool->clock;
    c->rules_version = rules_version;
    /* one prepared under other rules (or before an administrative change) is never used */
    while (c->count > 0 && prepared == NULL) {
      struct jail_prepared *top = c->ready[--c->count];
      if (c->generation[c->count] == pool->generation && c->jail_rules_version[c->count] == rules_version)
        prepared = top;
      else
        stale[stale_count++] = top;
    }
    if (prepared) pool->in_use++;
    /* a session's jail runs for the session's life: its hit counts when it is taken */
    if (prepared && session) atomic_fetch_add(&pool->session_hits, 1);
    pthread_cond_signal(&pool->wake);
  }
  pthread_mutex_unlock(&pool->lock);
  discard_all(pool, stale, stale_count);
  if (prepared == NULL) {
    atomic_fetch_add(session ? &pool->session_misses : &pool->misses, 1);
    return jail_run(config, result, err);
  }
  uint64_t prepared_leaf = leaf_id(prepared);
  int rc = jail_prepared_run(prepared, config, result, err);
  /* the call took the prelinked programs, or it ran in a fresh jail and left them */
  domed_kernel_prelink_drop(pool->domed, prepared_leaf);
  if (result->prepared) {
    if (!session) atomic_fetch_add(&pool->hits, 1);
    if (python && !session) atomic_fetch_add(&pool->interpreter_hits, 1);
  } else { /* it no longer waited, or did not fit: discarded, and the call ran fresh */
    if (session) atomic_fetch_sub(&pool->session_hits, 1);
    atomic_fetch_add(session ? &pool->session_misses : &pool->misses, 1);
    atomic_fetch_add(&pool->discards, 1);
  }
  pthread_mutex_lock(&pool->lock);
  pool->in_use--;
  pthread_cond_broadcast(&pool->idle);
  pthread_mutex_unlock(&pool->lock);
  return rc;
}

static unsigned ready_count(struct domed_jail_pool *pool, bool sessions) {
  unsigned ready = 0;
  pthread_mutex_lock(&pool->lock);
  for (size_t i = 0; i < POOL_CLASSES; i++)
    if (pool->classes[i].shape.session == sessions) ready += pool->classes[i].count;
  pthread_mutex_unlock(&pool->lock);
  return ready;
}

void domed_jail_pool_metrics(struct domed *domed, FILE *out) {
  struct domed_jail_pool *pool = domed->jail_pool;
  unsigned long long ready = pool ? ready_count(pool, false) : 0;
  unsigned long long session_ready = pool ? ready_count(pool, true) : 0;
  unsigned long long hits = pool ? atomic_load(&pool->hits) : 0,
                     misses = pool ? atomic_load(&pool->misses) : 0;
  unsigned long long discards = pool ? atomic_load(&pool->discards) : 0;
  unsigned long long interpreter_hits = pool ? atomic_load(&pool->interpreter_hits) : 0;
  unsigned long long refills = pool ? atomic_load(&pool->refills) : 0;
  unsigned long long failures = pool ? atomic_load(&pool->refill_failures) : 0;
  double refill_s = pool ? (double)atomic_load(&pool->refill_us) / 1e6 : 0;
  fprintf(out,
          "# HELP dome_jail_pool_size Prepared jails ready now (all limits classes).\n"
          "# TYPE dome_jail_pool_size gauge\ndome_jail_pool_size %llu\n"
          "# HELP dome_jail_pool_target Prepared jails kept per limits class (pool_size; 0: no pool).\n"
          "# TYPE dome_jail_pool_target gauge\ndome_jail_pool_target %u\n"
          "# HELP dome_jail_pool_hits_total Executions that ran in a prepared jail.\n"
          "# TYPE dome_jail_pool_hits_total counter\ndome_jail_pool_hits_total %llu\n"
          "# HELP dome_jail_pool_interpreter_hits_total Python executions whose interpreter was started in "
          "advance (a subset of hits).\n"
          "# TYPE dome_jail_pool_interpreter_hits_total counter\ndome_jail_pool_interpreter_hits_total %llu\n"
          "# HELP dome_jail_pool_misses_total Executions of a pooled shape that ran in a fresh jail.\n"
          "# TYPE dome_jail_pool_misses_total counter\ndome_jail_pool_misses_total %llu\n"
          "# HELP dome_jail_pool_discards_total Prepared jails destroyed unused (stale, replaced, dead).\n"
          "# TYPE dome_jail_pool_discards_total counter\ndome_jail_pool_discards_total %llu\n"
          "# HELP dome_jail_pool_refills_total Jails the refill prepared.\n"
          "# TYPE dome_jail_pool_refills_total counter\ndome_jail_pool_refills_total %llu\n"
          "# HELP dome_jail_pool_refill_failures_total Jails the refill could not prepare.\n"
          "# TYPE dome_jail_pool_refill_failures_total counter\ndome_jail_pool_refill_failures_total %llu\n"
          "# HELP dome_jail_pool_refill_seconds_sum Time the refill spent preparing jails.\n"
          "# TYPE dome_jail_pool_refill_seconds_sum counter\ndome_jail_pool_refill_seconds_sum %.6f\n",
          ready, pool ? pool->size : 0u, hits, interpreter_hits, misses, discards, refills, failures,
          refill_s);
  fprintf(
      out,
      "# HELP dome_session_pool_size Prepared session jails (kernel imported) ready now.\n"
      "# TYPE dome_session_pool_size gauge\ndome_session_pool_size %llu\n"
      "# HELP dome_session_pool_target Prepared session jails kept per session limits class "
      "(session_pool_size; 0: no pool).\n"
      "# TYPE dome_session_pool_target gauge\ndome_session_pool_target %u\n"
      "# HELP dome_session_pool_hits_total Sessions whose jail and kernel were prepared before the call.\n"
      "# TYPE dome_session_pool_hits_total counter\ndome_session_pool_hits_total %llu\n"
      "# HELP dome_session_pool_misses_total Sessions that started a fresh jail (none ready, or the call "
      "did not fit one).\n"
      "# TYPE dome_session_pool_misses_total counter\ndome_session_pool_misses_total %llu\n",
      session_ready, pool ? pool->session_size : 0u,
      pool ? (unsigned long long)atomic_load(&pool->session_hits) : 0ull,
      pool ? (unsigned long long)atomic_load(&pool->session_misses) : 0ull);
  fprintf(out,
          "# HELP dome_jail_pool_prelinked Prepared jails (one-shot and session) whose cgroup leaf has the "
          "kernel programs attached already, refusing until a call registers the jail.\n"
          "# TYPE dome_jail_pool_prelinked gauge\ndome_jail_pool_prelinked %zu\n",
          domed_kernel_prelinked(domed));
}

json_t *domed_jail_pool_status(struct domed *domed) {
  struct domed_jail_pool *pool = domed->jail_pool;
  if (pool == NULL) return json_pack("{s:i}", "pool_size", 0);
  return json_pack("{s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:i,s:I,s:I,s:I}", "pool_size", (int)pool->size, "ready",
                   (json_int_t)ready_count(pool, false), "hits", (json_int_t)atomic_load(&pool->hits),
                   "misses", (json_int_t)atomic_load(&pool->misses), "discards",
                   (json_int_t)atomic_load(&pool->discards), "refills",
                   (json_int_t)atomic_load(&pool->refills), "refill_failures",
                   (json_int_t)atomic_load(&pool->refill_failures), "refill_seconds",
                   (double)atomic_load(&pool->refill_us) / 1e6, "session_pool_size", (int)pool->session_size,
                   "session_ready", (json_int_t)ready_count(pool, true), "session_hits",
                   (json_int_t)atomic_load(&pool->session_hits), "session_misses",
                   (json_int_t)atomic_load(&pool->session_misses));
}
