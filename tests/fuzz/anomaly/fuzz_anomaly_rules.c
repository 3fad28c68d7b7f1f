/* libFuzzer target: the Sigma rule loader (supervisor/anomaly). The input is one rule file; a set that
 * loads is evaluated against a few journal-shaped events, its description built and released. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/anomaly/anomaly.h"

static const char *const events[] = {
    "{\"type\":\"authz.decision\",\"agent\":\"a\",\"action\":\"mcp:call\",\"decision\":\"deny\",\"tool\":"
    "\"x\"}",
    "{\"type\":\"exec.denial\",\"agent\":\"a\",\"object\":\"169.254.169.254:80\",\"request\":{\"context\":"
    "{\"dst_ip\":\"169.254.169.254\",\"dst_port\":80}}}",
    "{\"type\":\"exec.start\",\"agent\":\"b\",\"code\":\"import "
    "ctypes\\nlibc.unshare(0)\",\"files\":[{\"path\":\"a\"}]}",
    "{\"type\":\"exec.end\",\"agent\":\"b\",\"oom_killed\":true,\"exit_code\":137,\"time\":\"2026-12-01T23:"
    "00:00Z\"}",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  anomaly_loader *loader = anomaly_loader_create();
  if (loader == NULL) return 0;
  anomaly_loader_add_text(loader, "fuzz.yml", (const char *)data, size);
  anomaly_rule_set *set = NULL;
  dome_error err = {0};
  if (anomaly_loader_finish(loader, &set, &err) == 0) {
    json_decref(anomaly_rule_set_describe(set));
    anomaly_engine *engine = NULL;
    if (anomaly_engine_create(set, NULL, &engine, &err) == 0) {
      for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < sizeof events / sizeof events[0]; i++) {
          json_t *event = json_loads(events[i], 0, NULL);
          anomaly_engine_process(engine, event, (uint64_t)(round * 4 + i + 1),
                                 (int64_t)(round * 4 + i) * 1000000000, NULL, NULL);
          json_decref(event);
        }
      anomaly_engine_free(engine);
    }
    anomaly_rule_set_release(set);
  }
  anomaly_loader_free(loader);
  return 0;
}
