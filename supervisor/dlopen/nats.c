/* libnats (the NATS C client, Debian's libnats3.4): the functions supervisor/fleet calls, forwarded to the
 * library loaded on first use (dlopen.h says why; libnats brings libssl, libcrypto and libprotobuf-c, 4-5
 * ms of every start of dome, and only fleet mode uses it). Prototypes are nats/nats.h's. When the library
 * cannot be loaded every function that returns a natsStatus returns NATS_FAILED_TO_INITIALIZE and
 * nats_GetLastError names the library, the getters return 0 or NULL (their objects only come from the
 * library) and the Destroy and Close functions do nothing: fleet mode fails with that message, never
 * crashes. */
#include <nats/nats.h>
#include <stddef.h>
#include <string.h>

#include "supervisor/dlopen/dlopen.h"

/* The library's soname is libnats.so.MAJOR.MINOR (its CMake build's SOVERSION). */
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
#define SONAME "libnats.so." STRINGIFY(NATS_VERSION_MAJOR) "." STRINGIFY(NATS_VERSION_MINOR)

/* The status of every call made while the library cannot be loaded, and the last error that goes with it. */
#define NO_LIBRARY NATS_FAILED_TO_INITIALIZE
static const char no_library_text[] = "cannot load " SONAME " (the NATS client library of fleet mode)";

/* The table of forwarded functions: one slot each, named as the function, resolved together. */
#define NATS_FUNCTIONS(X)                    \
  X(nats_GetLastError)                       \
  X(natsStatus_GetText)                      \
  X(natsOptions_Create)                      \
  X(natsOptions_Destroy)                     \
  X(natsOptions_SetServers)                  \
  X(natsOptions_SetName)                     \
  X(natsOptions_SetMaxReconnect)             \
  X(natsOptions_SetReconnectWait)            \
  X(natsOptions_SetPingInterval)             \
  X(natsOptions_SetMaxPingsOut)              \
  X(natsOptions_SetTimeout)                  \
  X(natsOptions_SetReconnectBufSize)         \
  X(natsOptions_SetDisconnectedCB)           \
  X(natsOptions_SetReconnectedCB)            \
  X(natsOptions_SetRetryOnFailedConnect)     \
  X(natsOptions_SetUserCredentialsFromFiles) \
  X(natsOptions_SetSecure)                   \
  X(natsOptions_LoadCATrustedCertificates)   \
  X(natsOptions_LoadCertificatesChain)       \
  X(natsConnection_Connect)                  \
  X(natsConnection_Close)                    \
  X(natsConnection_Destroy)                  \
  X(natsConnection_JetStream)                \
  X(natsMsg_Create)                          \
  X(natsMsg_Destroy)                         \
  X(natsMsg_GetSubject)                      \
  X(natsMsg_GetData)                         \
  X(natsMsg_GetDataLength)                   \
  X(natsMsgHeader_Get)                       \
  X(jsOptions_Init)                          \
  X(jsCtx_Destroy)                           \
  X(jsStreamConfig_Init)                     \
  X(jsStreamInfo_Destroy)                    \
  X(jsPubOptions_Init)                       \
  X(jsPubAck_Destroy)                        \
  X(js_AddStream)                            \
  X(js_GetStreamInfo)                        \
  X(js_PublishMsg)                           \
  X(js_GetMsg)                               \
  X(js_GetLastMsg)                           \
  X(js_CreateKeyValue)                       \
  X(js_KeyValue)                             \
  X(kvConfig_Init)                           \
  X(kvStore_Destroy)                         \
  X(kvStore_Get)                             \
  X(kvStore_Create)                          \
  X(kvStore_CreateString)                    \
  X(kvStore_Update)                          \
  X(kvStore_Delete)                          \
  X(kvStore_WatchAll)                        \
  X(kvWatcher_Next)                          \
  X(kvWatcher_Destroy)                       \
  X(kvEntry_Destroy)                         \
  X(kvEntry_Key)                             \
  X(kvEntry_Operation)                       \
  X(kvEntry_Revision)                        \
  X(kvEntry_Value)                           \
  X(kvEntry_ValueLen)                        \
  X(kvEntry_ValueString)

#define SLOT(name) __typeof__(name) *name;
#define NAME(name) #name,
#define SLOT_ADDRESS(name) (void **)&library.name,

static struct { NATS_FUNCTIONS(SLOT) } library;
static int state;

static bool load(void) {
  static const char *const names[] = {NATS_FUNCTIONS(NAME)};
  void **const slots[] = {NATS_FUNCTIONS(SLOT_ADDRESS)};
  return dome_dlopen_resolve(SONAME, names, slots, (int)(sizeof names / sizeof names[0]), &state);
}

/* ---- errors ---- */

const char *nats_GetLastError(natsStatus *status) {
  if (load()) return library.nats_GetLastError(status);
  if (status != NULL) *status = NO_LIBRARY;
  return no_library_text;
}

const char *natsStatus_GetText(natsStatus s) {
  if (load()) return library.natsStatus_GetText(s);
  return s == NATS_OK ? "OK" : s == NO_LIBRARY ? "Initialization Failed" : "Error";
}

/* ---- options ---- */

natsStatus natsOptions_Create(natsOptions **newOpts) {
  return load() ? library.natsOptions_Create(newOpts) : NO_LIBRARY;
}

void natsOptions_Destroy(natsOptions *opts) {
  if (opts != NULL && load()) library.natsOptions_Destroy(opts);
}

natsStatus natsOptions_SetServers(natsOptions *opts, const char **servers, int serversCount) {
  return load() ? library.natsOptions_SetServers(opts, servers, serversCount) : NO_LIBRARY;
}

natsStatus natsOptions_SetName(natsOptions *opts, const char *name) {
  return load() ? library.natsOptions_SetName(opts, name) : NO_LIBRARY;
}

natsStatus natsOptions_SetMaxReconnect(natsOptions *opts, int maxReconnect) {
  return load() ? library.natsOptions_SetMaxReconnect(opts, maxReconnect) : NO_LIBRARY;
}

natsStatus natsOptions_SetReconnectWait(natsOptions *opts, int64_t reconnectWait) {
  return load() ? library.natsOptions_SetReconnectWait(opts, reconnectWait) : NO_LIBRARY;
}

natsStatus natsOptions_SetPingInterval(natsOptions *opts, int64_t interval) {
  return load() ? library.natsOptions_SetPingInterval(opts, interval) : NO_LIBRARY;
}

natsStatus natsOptions_SetMaxPingsOut(natsOptions *opts, int maxPingsOut) {
  return load() ? library.natsOptions_SetMaxPingsOut(opts, maxPingsOut) : NO_LIBRARY;
}

natsStatus natsOptions_SetTimeout(natsOptions *opts, int64_t timeout) {
  return load() ? library.natsOptions_SetTimeout(opts, timeout) : NO_LIBRARY;
}

natsStatus natsOptions_SetReconnectBufSize(natsOptions *opts, int reconnectBufSize) {
  return load() ? library.natsOptions_SetReconnectBufSize(opts, reconnectBufSize) : NO_LIBRARY;
}

natsStatus natsOptions_SetDisconnectedCB(natsOptions *opts, natsConnectionHandler disconnectedCb,
                                         void *closure) {
  return load() ? library.natsOptions_SetDisconnectedCB(opts, disconnectedCb, closure) : NO_LIBRARY;
}

natsStatus natsOptions_SetReconnectedCB(natsOptions *opts, natsConnectionHandler reconnectedCb,
                                        void *closure) {
  return load() ? library.natsOptions_SetReconnectedCB(opts, reconnectedCb, closure) : NO_LIBRARY;
}

natsStatus natsOptions_SetRetryOnFailedConnect(natsOptions *opts, bool retry,
                                               natsConnectionHandler connectedCb, void *closure) {
  return load() ? library.natsOptions_SetRetryOnFailedConnect(opts, retry, connectedCb, closure) : NO_LIBRARY;
}

natsStatus natsOptions_SetUserCredentialsFromFiles(natsOptions *opts, const char *userOrChainedFile,
                                                   const char *seedFile) {
  return load() ? library.natsOptions_SetUserCredentialsFromFiles(opts, userOrChainedFile, seedFile)
                : NO_LIBRARY;
}

natsStatus natsOptions_SetSecure(natsOptions *opts, bool secure) {
  return load() ? library.natsOptions_SetSecure(opts, secure) : NO_LIBRARY;
}

natsStatus natsOptions_LoadCATrustedCertificates(natsOptions *opts, const char *fileName) {
  return load() ? library.natsOptions_LoadCATrustedCertificates(opts, fileName) : NO_LIBRARY;
}

natsStatus natsOptions_LoadCertificatesChain(natsOptions *opts, const char *certsFileName,
                                             const char *keyFileName) {
  return load() ? library.natsOptions_LoadCertificatesChain(opts, certsFileName, keyFileName) : NO_LIBRARY;
}

/* ---- connections and messages ---- */

natsStatus natsConnection_Connect(natsConnection **nc, natsOptions *options) {
  return load() ? library.natsConnection_Connect(nc, options) : NO_LIBRARY;
}

void natsConnection_Close(natsConnection *nc) {
  if (nc != NULL && load()) library.natsConnection_Close(nc);
}

void natsConnection_Destroy(natsConnection *nc) {
  if (nc != NULL && load()) library.natsConnection_Destroy(nc);
}

natsStatus natsConnection_JetStream(jsCtx **js, natsConnection *nc, jsOptions *opts) {
  return load() ? library.natsConnection_JetStream(js, nc, opts) : NO_LIBRARY;
}

natsStatus natsMsg_Create(natsMsg **newMsg, const char *subj, const char *reply, const char *data,
                          int dataLen) {
  return load() ? library.natsMsg_Create(newMsg, subj, reply, data, dataLen) : NO_LIBRARY;
}

void natsMsg_Destroy(natsMsg *msg) {
  if (msg != NULL && load()) library.natsMsg_Destroy(msg);
}

const char *natsMsg_GetSubject(const natsMsg *msg) {
  return load() ? library.natsMsg_GetSubject(msg) : NULL;
}

const char *natsMsg_GetData(const natsMsg *msg) {
  return load() ? library.natsMsg_GetData(msg) : NULL;
}

int natsMsg_GetDataLength(const natsMsg *msg) {
  return load() ? library.natsMsg_GetDataLength(msg) : 0;
}

natsStatus natsMsgHeader_Get(natsMsg *msg, const char *key, const char **value) {
  return load() ? library.natsMsgHeader_Get(msg, key, value) : NO_LIBRARY;
}

/* ---- JetStream ---- */

/* The Init functions also zero the structure when the library is missing, so that a caller that goes on
 * to its next (failing) call never reads it uninitialised. */
natsStatus jsOptions_Init(jsOptions *opts) {
  if (load()) return library.jsOptions_Init(opts);
  if (opts != NULL) memset(opts, 0, sizeof *opts);
  return NO_LIBRARY;
}

void jsCtx_Destroy(jsCtx *js) {
  if (js != NULL && load()) library.jsCtx_Destroy(js);
}

natsStatus jsStreamConfig_Init(jsStreamConfig *cfg) {
  if (load()) return library.jsStreamConfig_Init(cfg);
  if (cfg != NULL) memset(cfg, 0, sizeof *cfg);
  return NO_LIBRARY;
}

void jsStreamInfo_Destroy(jsStreamInfo *si) {
  if (si != NULL && load()) library.jsStreamInfo_Destroy(si);
}

natsStatus jsPubOptions_Init(jsPubOptions *opts) {
  if (load()) return library.jsPubOptions_Init(opts);
  if (opts != NULL) memset(opts, 0, sizeof *opts);
  return NO_LIBRARY;
}

void jsPubAck_Destroy(jsPubAck *pubAck) {
  if (pubAck != NULL && load()) library.jsPubAck_Destroy(pubAck);
}

natsStatus js_AddStream(jsStreamInfo **si, jsCtx *js, jsStreamConfig *cfg, jsOptions *opts,
                        jsErrCode *errCode) {
  return load() ? library.js_AddStream(si, js, cfg, opts, errCode) : NO_LIBRARY;
}

natsStatus js_GetStreamInfo(jsStreamInfo **si, jsCtx *js, const char *stream, jsOptions *opts,
                            jsErrCode *errCode) {
  return load() ? library.js_GetStreamInfo(si, js, stream, opts, errCode) : NO_LIBRARY;
}

natsStatus js_PublishMsg(jsPubAck **pubAck, jsCtx *js, natsMsg *msg, jsPubOptions *opts, jsErrCode *errCode) {
  return load() ? library.js_PublishMsg(pubAck, js, msg, opts, errCode) : NO_LIBRARY;
}

natsStatus js_GetMsg(natsMsg **msg, jsCtx *js, const char *stream, uint64_t seq, jsOptions *opts,
                     jsErrCode *errCode) {
  return load() ? library.js_GetMsg(msg, js, stream, seq, opts, errCode) : NO_LIBRARY;
}

natsStatus js_GetLastMsg(natsMsg **msg, jsCtx *js, const char *stream, const char *subject, jsOptions *opts,
                         jsErrCode *errCode) {
  return load() ? library.js_GetLastMsg(msg, js, stream, subject, opts, errCode) : NO_LIBRARY;
}

/* ---- key-value buckets ---- */

natsStatus js_CreateKeyValue(kvStore **new_kv, jsCtx *js, kvConfig *cfg) {
  return load() ? library.js_CreateKeyValue(new_kv, js, cfg) : NO_LIBRARY;
}

natsStatus js_KeyValue(kvStore **new_kv, jsCtx *js, const char *bucket) {
  return load() ? library.js_KeyValue(new_kv, js, bucket) : NO_LIBRARY;
}

natsStatus kvConfig_Init(kvConfig *cfg) {
  if (load()) return library.kvConfig_Init(cfg);
  if (cfg != NULL) memset(cfg, 0, sizeof *cfg);
  return NO_LIBRARY;
}

void kvStore_Destroy(kvStore *kv) {
  if (kv != NULL && load()) library.kvStore_Destroy(kv);
}

natsStatus kvStore_Get(kvEntry **new_entry, kvStore *kv, const char *key) {
  return load() ? library.kvStore_Get(new_entry, kv, key) : NO_LIBRARY;
}

natsStatus kvStore_Create(uint64_t *rev, kvStore *kv, const char *key, const void *data, int len) {
  return load() ? library.kvStore_Create(rev, kv, key, data, len) : NO_LIBRARY;
}

natsStatus kvStore_CreateString(uint64_t *rev, kvStore *kv, const char *key, const char *data) {
  return load() ? library.kvStore_CreateString(rev, kv, key, data) : NO_LIBRARY;
}

natsStatus kvStore_Update(uint64_t *rev, kvStore *kv, const char *key, const void *data, int len,
                          uint64_t last) {
  return load() ? library.kvStore_Update(rev, kv, key, data, len, last) : NO_LIBRARY;
}

natsStatus kvStore_Delete(kvStore *kv, const char *key) {
  return load() ? library.kvStore_Delete(kv, key) : NO_LIBRARY;
}

natsStatus kvStore_WatchAll(kvWatcher **new_watcher, kvStore *kv, kvWatchOptions *opts) {
  return load() ? library.kvStore_WatchAll(new_watcher, kv, opts) : NO_LIBRARY;
}

natsStatus kvWatcher_Next(kvEntry **new_entry, kvWatcher *w, int64_t timeout) {
  return load() ? library.kvWatcher_Next(new_entry, w, timeout) : NO_LIBRARY;
}

void kvWatcher_Destroy(kvWatcher *w) {
  if (w != NULL && load()) library.kvWatcher_Destroy(w);
}

void kvEntry_Destroy(kvEntry *e) {
  if (e != NULL && load()) library.kvEntry_Destroy(e);
}

const char *kvEntry_Key(kvEntry *e) {
  return load() ? library.kvEntry_Key(e) : NULL;
}

kvOperation kvEntry_Operation(kvEntry *e) {
  return load() ? library.kvEntry_Operation(e) : kvOp_Unknown;
}

uint64_t kvEntry_Revision(kvEntry *e) {
  return load() ? library.kvEntry_Revision(e) : 0;
}

const void *kvEntry_Value(kvEntry *e) {
  return load() ? library.kvEntry_Value(e) : NULL;
}

int kvEntry_ValueLen(kvEntry *e) {
  return load() ? library.kvEntry_ValueLen(e) : 0;
}

const char *kvEntry_ValueString(kvEntry *e) {
  return load() ? library.kvEntry_ValueString(e) : NULL;
}
