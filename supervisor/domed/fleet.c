/* The seam between domed and fleet mode (supervisor/fleet/fleet.h): start and stop, the control
 * plane's changes applied here (a new active rules version is loaded), and the gate every request
 * passes (a node cut off from the fleet longer than fleet_stale_s refuses, fail closed). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "supervisor/domed/domed.h"
#include "supervisor/fleet/fleet.h"

static void applied(void *context, const char *document, const char *key, bool changed, uint64_t revision) {
  struct domed *domed = context;
  if (!changed) return;
  domed_log("info", "fleet", "msg=\"change applied from the fleet\" document=%s key=%s revision=%llu",
            document, key, (unsigned long long)revision);
  json_t *event = json_pack("{s:s,s:s,s:s,s:I}", "type", "fleet.applied", "document", document, "key", key,
                            "revision", (json_int_t)revision);
  dome_error err = {0};
  if (event && domed_audit_append(domed, event, NULL, &err) < 0)
    domed_log("error", "fleet", "msg=\"fleet.applied not journalled: %s\"", err.message);
  json_decref(event);
  if (strcmp(document, "rules") == 0 && strcmp(key, "index") == 0) domed_rules_load_active(domed);
  if (!atomic_load(&domed->stopping)) domed_jail_pool_invalidate(domed); /* prepared under the old state */
}

static int read_public_key(const char *journal_dir, char hex[72], dome_error *err) {
  char path[1200];
  snprintf(path, sizeof path, "%s/signing.pub", journal_dir);
  FILE *file = fopen(path, "re");
  if (file == NULL) return dome_error_set_errno(err, errno, "journal key `%s`", path);
  bool read = fgets(hex, 72, file) != NULL;
  fclose(file);
  if (!read) return dome_error_set(err, EINVAL, "journal key `%s`: empty", path);
  hex[strcspn(hex, "\r\n")] = '\0';
  return 0;
}

int domed_fleet_start(struct domed *domed, dome_error *err) {
  const struct domed_config *c = &domed->config;
  if (c->fleet_url[0] == '\0') return 0;
  char key[72];
  int rc = read_public_key(c->journal_dir, key, err);
  if (rc < 0) return rc;
  fleet_options options = {.url = c->fleet_url,
                           .fleet = c->fleet_name,
                           .node = c->node_name,
                           .creds = c->fleet_creds,
                           .tls_ca = c->fleet_tls_ca,
                           .tls_cert = c->fleet_tls_cert,
                           .tls_key = c->fleet_tls_key,
                           .replicas = (int)c->fleet_replicas};
  fleet *f = NULL;
  if ((rc = fleet_open(&options, 0, &f, err)) < 0) return rc;
  if ((rc = fleet_control_start(f, domed->store, applied, domed, err)) < 0 ||
      (rc = fleet_audit_start(f, c->journal_dir, key, err)) < 0) {
    fleet_close(f);
    return rc;
  }
  domed->fleet = f;
  dome_error why = {0};
  rc = fleet_serving(f, 0, 5000, &why);
  domed_log(rc == 0 ? "info" : "warn", "fleet", "msg=\"%s\" fleet=%s node=%s fleet_url=%s fleet_stale_s=%u",
            rc == 0 ? "fleet mode" : why.message, c->fleet_name, c->node_name, c->fleet_url,
            c->fleet_stale_s);
  return 0;
}

void domed_fleet_stop(struct domed *domed) {
  fleet *f = domed->fleet;
  if (f == NULL) return;
  /* the journal's last events (its closing checkpoint) get 2 s to reach the stream; the rest is sent
   * from the journal at the next start */
  for (int waited = 0;
       waited < 2000 && fleet_connected(f) && fleet_audit_published(f) < domed->journal_closed_seq;
       waited += 20) {
    struct timespec pause = {.tv_nsec = 20000000};
    nanosleep(&pause, NULL);
  }
  domed->fleet = NULL;
  fleet_close(f);
}

int domed_fleet_serving(struct domed *domed, dome_error *err) {
  fleet *f = domed->fleet;
  if (f == NULL) return 0;
  int rc = fleet_serving(f, domed->config.fleet_stale_s, 3000, err);
  return rc < 0 ? -EPERM : 0;
}
