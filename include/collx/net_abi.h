/*
 * collx - NCCL network plugin ABI, as seen from the plugin side.
 *
 * Written for collx from the documented layout of NCCL's external network
 * plugin interface (ncclNet v7 to v12).  Only what the plugin needs
 * is declared; the layouts are pinned with _Static_assert below so that any
 * drift from the ABI NCCL expects breaks the build instead of a job.
 *
 * What changes between the versions collx exports:
 *   v7   regMr takes an int size; properties have no regIsGlobal.
 *   v8   regMr takes a size_t size; properties gain regIsGlobal.
 *   v9   isend/irecv take size_t sizes (test and iflush keep int); properties
 *        gain forceFlush, vProps (virtual NIC members), maxP2pBytes and
 *        maxCollBytes; the table gains makeVDevice.
 *   v10  init also receives a profiler callback; connect receives a comm
 *        config (traffic class); isend/irecv receive profiler handles.
 *   v11  (NCCL 2.28, 2.29) init is called once per communicator with its id
 *        and comm config and returns a context; listen and connect take
 *        that context (connect no longer takes a config); the table gains
 *        finalize(context) and setNetAttr(context, hints); properties gain
 *        maxMultiRequestSize.
 *   v12  (NCCL 2.30) virtual devices of up to 8 members; properties gain
 *        railId and planeId (int16_t each, after maxMultiRequestSize).
 */
#ifndef COLLX_NET_ABI_H
#define COLLX_NET_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Result codes NCCL understands; numbering is part of the ABI. */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

/* Logger levels and subsystems NCCL passes to the plugin's init. */
typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

typedef enum {
  NCCL_INIT = 0x1,
  NCCL_COLL = 0x2,
  NCCL_P2P = 0x4,
  NCCL_SHM = 0x8,
  NCCL_NET = 0x10,
  NCCL_GRAPH = 0x20,
  NCCL_TUNING = 0x40,
  NCCL_ENV = 0x80,
  NCCL_ALLOC = 0x100,
  NCCL_CALL = 0x200,
  NCCL_PROXY = 0x400,
  NCCL_NVLS = 0x800,
  NCCL_BOOTSTRAP = 0x1000,
  NCCL_REG = 0x2000,
  NCCL_ALL = ~0
} ncclDebugLogSubSys;

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags,
                                  const char *file, int line, const char *fmt, ...);

/* Memory kinds a device can send from / receive into (ptrSupport bits). */
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

/* Opaque connection handle exchanged out of band by NCCL. */
#define NCCL_NET_HANDLE_MAXSIZE 128
/* Requests NCCL may keep outstanding on one comm. */
#define NCCL_NET_MAX_REQUESTS 32

typedef enum {
  NCCL_NET_DEVICE_HOST = 0,
  NCCL_NET_DEVICE_UNPACK = 1
} ncclNetDeviceType;

typedef struct {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void *handle;
  size_t size;
  int needsProxyProgress;
} ncclNetDeviceHandle_v8_t;

typedef struct {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;      /* Mbps */
  int port;
  float latency;  /* us */
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
} ncclNetProperties_v8_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t *props);
  ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
  ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
                          ncclNetDeviceHandle_v8_t **sendDevComm);
  ncclResult_t (*accept)(void *listenComm, void **recvComm,
                         ncclNetDeviceHandle_v8_t **recvDevComm);
  ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
                              uint64_t offset, int fd, void **mhandle);
  ncclResult_t (*deregMr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
                        void **request);
  ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
                        void **mhandles, void **request);
  ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                         void **request);
  ncclResult_t (*test)(void *request, int *done, int *sizes);
  ncclResult_t (*closeSend)(void *sendComm);
  ncclResult_t (*closeRecv)(void *recvComm);
  ncclResult_t (*closeListen)(void *listenComm);
  ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
} ncclNet_v8_t;

/* ---- v7 ---------------------------------------------------------------- */

/* The device handle kept one layout from v7 to v10. */
typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_v7_t;

typedef struct {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int speed;      /* Mbps */
  int port;
  float latency;  /* us */
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
} ncclNetProperties_v7_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v7_t *props);
  ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
  ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
                          ncclNetDeviceHandle_v7_t **sendDevComm);
  ncclResult_t (*accept)(void *listenComm, void **recvComm,
                         ncclNetDeviceHandle_v7_t **recvDevComm);
  ncclResult_t (*regMr)(void *comm, void *data, int size, int type, void **mhandle);
  ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
                              uint64_t offset, int fd, void **mhandle);
  ncclResult_t (*deregMr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
                        void **request);
  ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
                        void **mhandles, void **request);
  ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                         void **request);
  ncclResult_t (*test)(void *request, int *done, int *sizes);
  ncclResult_t (*closeSend)(void *sendComm);
  ncclResult_t (*closeRecv)(void *recvComm);
  ncclResult_t (*closeListen)(void *listenComm);
  ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
} ncclNet_v7_t;

/* ---- v9 ---------------------------------------------------------------- */

typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_v9_t;

/* Physical devices a virtual NIC is made of (NIC fusion). */
#define NCCL_NET_MAX_DEVS_PER_NIC_V9 4
typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V9];
} ncclNetVDeviceProps_v9_t;

typedef struct {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;      /* Mbps */
  int port;
  float latency;  /* us */
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v9_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} ncclNetProperties_v9_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t *props);
  ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
  ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
                          ncclNetDeviceHandle_v9_t **sendDevComm);
  ncclResult_t (*accept)(void *listenComm, void **recvComm,
                         ncclNetDeviceHandle_v9_t **recvDevComm);
  ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
                              uint64_t offset, int fd, void **mhandle);
  ncclResult_t (*deregMr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                        void **request);
  ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                        void **mhandles, void **request);
  /* iflush and test still carry int sizes in v9. */
  ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                         void **request);
  ncclResult_t (*test)(void *request, int *done, int *sizes);
  ncclResult_t (*closeSend)(void *sendComm);
  ncclResult_t (*closeRecv)(void *recvComm);
  ncclResult_t (*closeListen)(void *listenComm);
  ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
  ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v9_t *props);
} ncclNet_v9_t;

/* ---- v10 --------------------------------------------------------------- */

typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_v10_t;

#define NCCL_NET_MAX_DEVS_PER_NIC_V10 4
typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V10];
} ncclNetVDeviceProps_v10_t;

/* Per-connection settings NCCL passes to connect. */
#define NCCL_NET_TRAFFIC_CLASS_UNDEF (-1)
typedef struct {
  int trafficClass;  /* plugin-specific; NCCL_NET_TRAFFIC_CLASS_UNDEF when unset */
} ncclNetCommConfig_v10_t;

/* NCCL's profiler hook handed to init (v10 on).  The plugin starts an
 * event under the per-operation handle isend/irecv received (`phandle`,
 * NCCL's proxy step), NCCL fills *eHandle when a profiler takes the event,
 * and the plugin later stops that same *eHandle.  NCCL passes its callback
 * whether or not a profiler plugin is loaded; without one the callback
 * returns at once and leaves *eHandle as it was. */
typedef ncclResult_t (*ncclProfilerCallback_t)(void **eHandle, int type, void *phandle,
                                               int64_t pluginId, void *extData);

/* `type` of a profiler callback (NCCL's nccl_common.h). */
enum {
  ncclProfilerNetEventStart = 0,
  ncclProfilerNetEventStop = 1,
  ncclProfilerNetEventUpdate = 2,
  ncclProfilerNetEventUpdateAndStop = 3,
};

/* `pluginId`: a network type in bits 16-31 and the version of its event
 * descriptor in bits 0-15.  A profiler (NCCL's example among them) decodes
 * extData by this id; collx uses the socket type, which the example
 * profiler prints ("NET_SOCK" events under each proxy step). */
#define NCCL_PROFILER_NET_VER_BITS 16
#define NCCL_PROFILER_NET_VER_MASK (~0U >> NCCL_PROFILER_NET_VER_BITS)
#define NCCL_PROFILER_NET_TYPE_MASK (~0U << NCCL_PROFILER_NET_VER_BITS)
#define NCCL_PROFILER_NET_TYPE_IB (1U << NCCL_PROFILER_NET_VER_BITS)
#define NCCL_PROFILER_NET_TYPE_SOCK (2U << NCCL_PROFILER_NET_VER_BITS)
#define NCCL_PROFILER_NET_SOCKET_VER 1

/* The socket event descriptor, version 1: `type` ncclProfileSocket, `op`
 * NCCL's socket op (0 send, 1 receive), `length` bytes. */
enum { ncclProfileSocket = 1 << 0 };
#define COLLX_PROFILER_SOCK_SEND 0
#define COLLX_PROFILER_SOCK_RECV 1
typedef struct {
  uint8_t type;
  union {
    struct {
      int fd;
      int op;
      size_t length;
    } sock;
  };
} ncclProfilerNetSockDescr_v1_t;

typedef struct {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;      /* Mbps */
  int port;
  float latency;  /* us */
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v10_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} ncclNetProperties_v10_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t *props);
  ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
  ncclResult_t (*connect)(int dev, ncclNetCommConfig_v10_t *config, void *handle,
                          void **sendComm, ncclNetDeviceHandle_v10_t **sendDevComm);
  ncclResult_t (*accept)(void *listenComm, void **recvComm,
                         ncclNetDeviceHandle_v10_t **recvDevComm);
  ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
                              uint64_t offset, int fd, void **mhandle);
  ncclResult_t (*deregMr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                        void *phandle, void **request);
  ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                        void **mhandles, void **phandles, void **request);
  ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                         void **request);
  ncclResult_t (*test)(void *request, int *done, int *sizes);
  ncclResult_t (*closeSend)(void *sendComm);
  ncclResult_t (*closeRecv)(void *recvComm);
  ncclResult_t (*closeListen)(void *listenComm);
  ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
  ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v10_t *props);
} ncclNet_v10_t;

/* ---- v11 --------------------------------------------------------------- */

typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_v11_t;

#define NCCL_NET_MAX_DEVS_PER_NIC_V11 4
typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V11];
} ncclNetVDeviceProps_v11_t;

/* The communicator's settings, handed to init (one context each). */
typedef ncclNetCommConfig_v10_t ncclNetCommConfig_v11_t;

/* Hints NCCL passes through setNetAttr, before connections are made and
 * again whenever the shape of the traffic changes.  Every count is either
 * NCCL_NET_ATTR_UNDEF or a number; op, algo and proto are bit masks (bit i
 * set: ncclFunc_t / algorithm / protocol i may run), all ones when unset. */
#define NCCL_NET_ATTR_UNDEF (-1)
typedef struct {
  int32_t maxConcurrentPeers;  /* peers this side may talk to at once */
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;     /* connections (channels) per peer at once */
  int32_t minFlowsPerPeer;
} ncclNetCommAttr_v11_t;

typedef struct {
  ncclNetCommAttr_v11_t sendCommAttr;
  ncclNetCommAttr_v11_t recvCommAttr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
} ncclNetAttr_v11_t;

typedef struct {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;      /* Mbps */
  int port;
  float latency;  /* us */
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v11_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;  /* requests one multi-request call may carry */
} ncclNetProperties_v11_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_v11_t *config,
                       ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t *props);
  ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
  ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
                          ncclNetDeviceHandle_v11_t **sendDevComm);
  ncclResult_t (*accept)(void *listenComm, void **recvComm,
                         ncclNetDeviceHandle_v11_t **recvDevComm);
  ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
                              uint64_t offset, int fd, void **mhandle);
  ncclResult_t (*deregMr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                        void *phandle, void **request);
  ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                        void **mhandles, void **phandles, void **request);
  ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                         void **request);
  ncclResult_t (*test)(void *request, int *done, int *sizes);
  ncclResult_t (*closeSend)(void *sendComm);
  ncclResult_t (*closeRecv)(void *recvComm);
  ncclResult_t (*closeListen)(void *listenComm);
  ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
  ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v11_t *props);
  /* The communicator that init made ctx for is gone. */
  ncclResult_t (*finalize)(void *ctx);
  ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_v11_t *netAttr);
} ncclNet_v11_t;

/* ---- v12 --------------------------------------------------------------- */

typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_v12_t;

#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8
typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

typedef ncclNetCommConfig_v10_t ncclNetCommConfig_v12_t;
typedef ncclNetCommAttr_v11_t ncclNetCommAttr_v12_t;
typedef ncclNetAttr_v11_t ncclNetAttr_v12_t;

/* railId / planeId value for "not known". */
#define NCCL_NET_ID_UNDEF (-1)

typedef struct {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;      /* Mbps */
  int port;
  float latency;  /* us */
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v12_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;   /* NICs with one rail id are wired to one switch rail */
  int16_t planeId;  /* the network plane of a multi-plane NIC port */
} ncclNetProperties_v12_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_v12_t *config,
                       ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t *props);
  ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
  ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
                          ncclNetDeviceHandle_v12_t **sendDevComm);
  ncclResult_t (*accept)(void *listenComm, void **recvComm,
                         ncclNetDeviceHandle_v12_t **recvDevComm);
  ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
                              uint64_t offset, int fd, void **mhandle);
  ncclResult_t (*deregMr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                        void *phandle, void **request);
  ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                        void **mhandles, void **phandles, void **request);
  ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                         void **request);
  ncclResult_t (*test)(void *request, int *done, int *sizes);
  ncclResult_t (*closeSend)(void *sendComm);
  ncclResult_t (*closeRecv)(void *recvComm);
  ncclResult_t (*closeListen)(void *listenComm);
  ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
  ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v12_t *props);
  ncclResult_t (*finalize)(void *ctx);
  ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_v12_t *netAttr);
} ncclNet_v12_t;

/* ---- Layout pins (x86-64 / aarch64 LP64) --------------------------------- */
#if defined(__LP64__)
#if defined(__cplusplus) && !defined(_Static_assert)
#define _Static_assert static_assert /* the header is installed; C++ may include it */
#endif
_Static_assert(sizeof(ncclNetProperties_v8_t) == 64, "ncclNetProperties_v8_t size");
_Static_assert(offsetof(ncclNetProperties_v8_t, name) == 0, "props.name");
_Static_assert(offsetof(ncclNetProperties_v8_t, pciPath) == 8, "props.pciPath");
_Static_assert(offsetof(ncclNetProperties_v8_t, guid) == 16, "props.guid");
_Static_assert(offsetof(ncclNetProperties_v8_t, ptrSupport) == 24, "props.ptrSupport");
_Static_assert(offsetof(ncclNetProperties_v8_t, regIsGlobal) == 28, "props.regIsGlobal");
_Static_assert(offsetof(ncclNetProperties_v8_t, speed) == 32, "props.speed");
_Static_assert(offsetof(ncclNetProperties_v8_t, port) == 36, "props.port");
_Static_assert(offsetof(ncclNetProperties_v8_t, latency) == 40, "props.latency");
_Static_assert(offsetof(ncclNetProperties_v8_t, maxComms) == 44, "props.maxComms");
_Static_assert(offsetof(ncclNetProperties_v8_t, maxRecvs) == 48, "props.maxRecvs");
_Static_assert(offsetof(ncclNetProperties_v8_t, netDeviceType) == 52, "props.netDeviceType");
_Static_assert(offsetof(ncclNetProperties_v8_t, netDeviceVersion) == 56, "props.netDeviceVersion");

_Static_assert(sizeof(ncclNetDeviceHandle_v8_t) == 32, "ncclNetDeviceHandle_v8_t size");
_Static_assert(offsetof(ncclNetDeviceHandle_v8_t, handle) == 8, "devhandle.handle");
_Static_assert(offsetof(ncclNetDeviceHandle_v8_t, size) == 16, "devhandle.size");
_Static_assert(offsetof(ncclNetDeviceHandle_v8_t, needsProxyProgress) == 24, "devhandle.npp");

/* 19 pointer-sized members: name plus 18 entry points, in this order. */
_Static_assert(sizeof(ncclNet_v8_t) == 19 * sizeof(void *), "ncclNet_v8_t size");
_Static_assert(offsetof(ncclNet_v8_t, init) == 1 * 8, "v8.init");
_Static_assert(offsetof(ncclNet_v8_t, getProperties) == 3 * 8, "v8.getProperties");
_Static_assert(offsetof(ncclNet_v8_t, accept) == 6 * 8, "v8.accept");
_Static_assert(offsetof(ncclNet_v8_t, regMrDmaBuf) == 8 * 8, "v8.regMrDmaBuf");
_Static_assert(offsetof(ncclNet_v8_t, isend) == 10 * 8, "v8.isend");
_Static_assert(offsetof(ncclNet_v8_t, test) == 13 * 8, "v8.test");
_Static_assert(offsetof(ncclNet_v8_t, closeListen) == 16 * 8, "v8.closeListen");
_Static_assert(offsetof(ncclNet_v8_t, irecvConsumed) == 18 * 8, "v8.irecvConsumed");

/* v7: v8 without regIsGlobal, everything after ptrSupport moves up by 4. */
_Static_assert(sizeof(ncclNetProperties_v7_t) == 56, "ncclNetProperties_v7_t size");
_Static_assert(offsetof(ncclNetProperties_v7_t, name) == 0, "v7 props.name");
_Static_assert(offsetof(ncclNetProperties_v7_t, pciPath) == 8, "v7 props.pciPath");
_Static_assert(offsetof(ncclNetProperties_v7_t, guid) == 16, "v7 props.guid");
_Static_assert(offsetof(ncclNetProperties_v7_t, ptrSupport) == 24, "v7 props.ptrSupport");
_Static_assert(offsetof(ncclNetProperties_v7_t, speed) == 28, "v7 props.speed");
_Static_assert(offsetof(ncclNetProperties_v7_t, port) == 32, "v7 props.port");
_Static_assert(offsetof(ncclNetProperties_v7_t, latency) == 36, "v7 props.latency");
_Static_assert(offsetof(ncclNetProperties_v7_t, maxComms) == 40, "v7 props.maxComms");
_Static_assert(offsetof(ncclNetProperties_v7_t, maxRecvs) == 44, "v7 props.maxRecvs");
_Static_assert(offsetof(ncclNetProperties_v7_t, netDeviceType) == 48, "v7 props.netDeviceType");
_Static_assert(offsetof(ncclNetProperties_v7_t, netDeviceVersion) == 52, "v7 props.netDeviceVersion");

_Static_assert(sizeof(ncclNet_v7_t) == 19 * sizeof(void *), "ncclNet_v7_t size");
_Static_assert(offsetof(ncclNet_v7_t, init) == 1 * 8, "v7.init");
_Static_assert(offsetof(ncclNet_v7_t, getProperties) == 3 * 8, "v7.getProperties");
_Static_assert(offsetof(ncclNet_v7_t, connect) == 5 * 8, "v7.connect");
_Static_assert(offsetof(ncclNet_v7_t, regMr) == 7 * 8, "v7.regMr");
_Static_assert(offsetof(ncclNet_v7_t, regMrDmaBuf) == 8 * 8, "v7.regMrDmaBuf");
_Static_assert(offsetof(ncclNet_v7_t, isend) == 10 * 8, "v7.isend");
_Static_assert(offsetof(ncclNet_v7_t, test) == 13 * 8, "v7.test");
_Static_assert(offsetof(ncclNet_v7_t, closeListen) == 16 * 8, "v7.closeListen");
_Static_assert(offsetof(ncclNet_v7_t, irecvConsumed) == 18 * 8, "v7.irecvConsumed");

/* v9 and v10 share one property layout: v8's with forceFlush after
 * regIsGlobal, then vProps (4 + 4 * 4 bytes), padding to 8, two size_t. */
_Static_assert(sizeof(ncclNetVDeviceProps_v9_t) == 20, "ncclNetVDeviceProps_v9_t size");
_Static_assert(offsetof(ncclNetVDeviceProps_v9_t, devs) == 4, "v9 vProps.devs");
_Static_assert(sizeof(ncclNetVDeviceProps_v10_t) == 20, "ncclNetVDeviceProps_v10_t size");
_Static_assert(offsetof(ncclNetVDeviceProps_v10_t, devs) == 4, "v10 vProps.devs");

_Static_assert(sizeof(ncclNetProperties_v9_t) == 104, "ncclNetProperties_v9_t size");
_Static_assert(offsetof(ncclNetProperties_v9_t, ptrSupport) == 24, "v9 props.ptrSupport");
_Static_assert(offsetof(ncclNetProperties_v9_t, regIsGlobal) == 28, "v9 props.regIsGlobal");
_Static_assert(offsetof(ncclNetProperties_v9_t, forceFlush) == 32, "v9 props.forceFlush");
_Static_assert(offsetof(ncclNetProperties_v9_t, speed) == 36, "v9 props.speed");
_Static_assert(offsetof(ncclNetProperties_v9_t, port) == 40, "v9 props.port");
_Static_assert(offsetof(ncclNetProperties_v9_t, latency) == 44, "v9 props.latency");
_Static_assert(offsetof(ncclNetProperties_v9_t, maxComms) == 48, "v9 props.maxComms");
_Static_assert(offsetof(ncclNetProperties_v9_t, maxRecvs) == 52, "v9 props.maxRecvs");
_Static_assert(offsetof(ncclNetProperties_v9_t, netDeviceType) == 56, "v9 props.netDeviceType");
_Static_assert(offsetof(ncclNetProperties_v9_t, netDeviceVersion) == 60, "v9 props.netDeviceVersion");
_Static_assert(offsetof(ncclNetProperties_v9_t, vProps) == 64, "v9 props.vProps");
_Static_assert(offsetof(ncclNetProperties_v9_t, maxP2pBytes) == 88, "v9 props.maxP2pBytes");
_Static_assert(offsetof(ncclNetProperties_v9_t, maxCollBytes) == 96, "v9 props.maxCollBytes");

_Static_assert(sizeof(ncclNetProperties_v10_t) == 104, "ncclNetProperties_v10_t size");
_Static_assert(offsetof(ncclNetProperties_v10_t, ptrSupport) == 24, "v10 props.ptrSupport");
_Static_assert(offsetof(ncclNetProperties_v10_t, regIsGlobal) == 28, "v10 props.regIsGlobal");
_Static_assert(offsetof(ncclNetProperties_v10_t, forceFlush) == 32, "v10 props.forceFlush");
_Static_assert(offsetof(ncclNetProperties_v10_t, speed) == 36, "v10 props.speed");
_Static_assert(offsetof(ncclNetProperties_v10_t, latency) == 44, "v10 props.latency");
_Static_assert(offsetof(ncclNetProperties_v10_t, netDeviceVersion) == 60, "v10 props.netDeviceVersion");
_Static_assert(offsetof(ncclNetProperties_v10_t, vProps) == 64, "v10 props.vProps");
_Static_assert(offsetof(ncclNetProperties_v10_t, maxP2pBytes) == 88, "v10 props.maxP2pBytes");
_Static_assert(offsetof(ncclNetProperties_v10_t, maxCollBytes) == 96, "v10 props.maxCollBytes");

_Static_assert(sizeof(ncclNetCommConfig_v10_t) == 4, "ncclNetCommConfig_v10_t size");

/* v9 and v10: v8's 19 members plus makeVDevice; v10 changes signatures only. */
_Static_assert(sizeof(ncclNet_v9_t) == 20 * sizeof(void *), "ncclNet_v9_t size");
_Static_assert(offsetof(ncclNet_v9_t, init) == 1 * 8, "v9.init");
_Static_assert(offsetof(ncclNet_v9_t, connect) == 5 * 8, "v9.connect");
_Static_assert(offsetof(ncclNet_v9_t, regMr) == 7 * 8, "v9.regMr");
_Static_assert(offsetof(ncclNet_v9_t, isend) == 10 * 8, "v9.isend");
_Static_assert(offsetof(ncclNet_v9_t, irecv) == 11 * 8, "v9.irecv");
_Static_assert(offsetof(ncclNet_v9_t, test) == 13 * 8, "v9.test");
_Static_assert(offsetof(ncclNet_v9_t, irecvConsumed) == 18 * 8, "v9.irecvConsumed");
_Static_assert(offsetof(ncclNet_v9_t, makeVDevice) == 19 * 8, "v9.makeVDevice");

_Static_assert(sizeof(ncclNet_v10_t) == 20 * sizeof(void *), "ncclNet_v10_t size");
_Static_assert(offsetof(ncclNet_v10_t, init) == 1 * 8, "v10.init");
_Static_assert(offsetof(ncclNet_v10_t, connect) == 5 * 8, "v10.connect");
_Static_assert(offsetof(ncclNet_v10_t, regMr) == 7 * 8, "v10.regMr");
_Static_assert(offsetof(ncclNet_v10_t, isend) == 10 * 8, "v10.isend");
_Static_assert(offsetof(ncclNet_v10_t, irecv) == 11 * 8, "v10.irecv");
_Static_assert(offsetof(ncclNet_v10_t, test) == 13 * 8, "v10.test");
_Static_assert(offsetof(ncclNet_v10_t, irecvConsumed) == 18 * 8, "v10.irecvConsumed");
_Static_assert(offsetof(ncclNet_v10_t, makeVDevice) == 19 * 8, "v10.makeVDevice");
/* v11: the v10 property layout plus maxMultiRequestSize (and padding to 8). */
_Static_assert(sizeof(ncclNetVDeviceProps_v11_t) == 20, "ncclNetVDeviceProps_v11_t size");
_Static_assert(sizeof(ncclNetProperties_v11_t) == 112, "ncclNetProperties_v11_t size");
_Static_assert(offsetof(ncclNetProperties_v11_t, forceFlush) == 32, "v11 props.forceFlush");
_Static_assert(offsetof(ncclNetProperties_v11_t, speed) == 36, "v11 props.speed");
_Static_assert(offsetof(ncclNetProperties_v11_t, netDeviceVersion) == 60, "v11 props.netDeviceVersion");
_Static_assert(offsetof(ncclNetProperties_v11_t, vProps) == 64, "v11 props.vProps");
_Static_assert(offsetof(ncclNetProperties_v11_t, maxP2pBytes) == 88, "v11 props.maxP2pBytes");
_Static_assert(offsetof(ncclNetProperties_v11_t, maxCollBytes) == 96, "v11 props.maxCollBytes");
_Static_assert(offsetof(ncclNetProperties_v11_t, maxMultiRequestSize) == 104, "v11 props.maxMultiRequestSize");

/* v12: vProps grows to 4 + 8 * 4 bytes, moving everything after it by 16;
 * railId and planeId fill the padding after maxMultiRequestSize. */
_Static_assert(sizeof(ncclNetVDeviceProps_v12_t) == 36, "ncclNetVDeviceProps_v12_t size");
_Static_assert(offsetof(ncclNetVDeviceProps_v12_t, devs) == 4, "v12 vProps.devs");
_Static_assert(sizeof(ncclNetProperties_v12_t) == 128, "ncclNetProperties_v12_t size");
_Static_assert(offsetof(ncclNetProperties_v12_t, speed) == 36, "v12 props.speed");
_Static_assert(offsetof(ncclNetProperties_v12_t, vProps) == 64, "v12 props.vProps");
_Static_assert(offsetof(ncclNetProperties_v12_t, maxP2pBytes) == 104, "v12 props.maxP2pBytes");
_Static_assert(offsetof(ncclNetProperties_v12_t, maxCollBytes) == 112, "v12 props.maxCollBytes");
_Static_assert(offsetof(ncclNetProperties_v12_t, maxMultiRequestSize) == 120, "v12 props.maxMultiRequestSize");
_Static_assert(offsetof(ncclNetProperties_v12_t, railId) == 124, "v12 props.railId");
_Static_assert(offsetof(ncclNetProperties_v12_t, planeId) == 126, "v12 props.planeId");

/* The hints: two blocks of four int32 counts, then three 32-bit masks. */
_Static_assert(sizeof(ncclNetCommAttr_v11_t) == 16, "ncclNetCommAttr_v11_t size");
_Static_assert(offsetof(ncclNetCommAttr_v11_t, minConcurrentPeers) == 4, "attr.minConcurrentPeers");
_Static_assert(offsetof(ncclNetCommAttr_v11_t, maxFlowsPerPeer) == 8, "attr.maxFlowsPerPeer");
_Static_assert(offsetof(ncclNetCommAttr_v11_t, minFlowsPerPeer) == 12, "attr.minFlowsPerPeer");
_Static_assert(sizeof(ncclNetAttr_v11_t) == 44, "ncclNetAttr_v11_t size");
_Static_assert(offsetof(ncclNetAttr_v11_t, recvCommAttr) == 16, "netAttr.recvCommAttr");
_Static_assert(offsetof(ncclNetAttr_v11_t, op) == 32, "netAttr.op");
_Static_assert(offsetof(ncclNetAttr_v11_t, algo) == 36, "netAttr.algo");
_Static_assert(offsetof(ncclNetAttr_v11_t, proto) == 40, "netAttr.proto");

/* v11 and v12: v10's 20 members plus finalize and setNetAttr. */
_Static_assert(sizeof(ncclNet_v11_t) == 22 * sizeof(void *), "ncclNet_v11_t size");
_Static_assert(offsetof(ncclNet_v11_t, init) == 1 * 8, "v11.init");
_Static_assert(offsetof(ncclNet_v11_t, listen) == 4 * 8, "v11.listen");
_Static_assert(offsetof(ncclNet_v11_t, connect) == 5 * 8, "v11.connect");
_Static_assert(offsetof(ncclNet_v11_t, isend) == 10 * 8, "v11.isend");
_Static_assert(offsetof(ncclNet_v11_t, test) == 13 * 8, "v11.test");
_Static_assert(offsetof(ncclNet_v11_t, makeVDevice) == 19 * 8, "v11.makeVDevice");
_Static_assert(offsetof(ncclNet_v11_t, finalize) == 20 * 8, "v11.finalize");
_Static_assert(offsetof(ncclNet_v11_t, setNetAttr) == 21 * 8, "v11.setNetAttr");
_Static_assert(sizeof(ncclNet_v12_t) == 22 * sizeof(void *), "ncclNet_v12_t size");
_Static_assert(offsetof(ncclNet_v12_t, init) == 1 * 8, "v12.init");
_Static_assert(offsetof(ncclNet_v12_t, connect) == 5 * 8, "v12.connect");
_Static_assert(offsetof(ncclNet_v12_t, irecv) == 11 * 8, "v12.irecv");
_Static_assert(offsetof(ncclNet_v12_t, makeVDevice) == 19 * 8, "v12.makeVDevice");
_Static_assert(offsetof(ncclNet_v12_t, finalize) == 20 * 8, "v12.finalize");
_Static_assert(offsetof(ncclNet_v12_t, setNetAttr) == 21 * 8, "v12.setNetAttr");
/* The socket event descriptor as NCCL's profilers read it. */
_Static_assert(offsetof(ncclProfilerNetSockDescr_v1_t, type) == 0, "sock descr type");
_Static_assert(offsetof(ncclProfilerNetSockDescr_v1_t, sock.fd) == 8, "sock descr fd");
_Static_assert(offsetof(ncclProfilerNetSockDescr_v1_t, sock.op) == 12, "sock descr op");
_Static_assert(offsetof(ncclProfilerNetSockDescr_v1_t, sock.length) == 16, "sock descr length");
_Static_assert(sizeof(ncclProfilerNetSockDescr_v1_t) == 24, "sock descr size");
_Static_assert((NCCL_PROFILER_NET_TYPE_SOCK | NCCL_PROFILER_NET_SOCKET_VER) == 0x20001, "sock plugin id");
#endif

#ifdef __cplusplus
}
#endif
#endif /* COLLX_NET_ABI_H */
