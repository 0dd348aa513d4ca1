/*
 * collx - NCCL network plugin ABI, as seen from the plugin side.
 *
 * Written for collx from the documented layout of NCCL's external network
 * plugin interface (ncclNet v8).  Only what the plugin needs is declared; the
 * layouts are pinned with _Static_assert below so that any drift from the
 * ABI NCCL expects breaks the build instead of a job.
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

/* ---- Layout pins (x86-64 / aarch64 LP64) --------------------------------- */
#if defined(__LP64__)
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
#endif

#ifdef __cplusplus
}
#endif
#endif /* COLLX_NET_ABI_H */
