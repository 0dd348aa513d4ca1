/*
 * collx's TCP wire protocol.  All fields are little-endian host order (collx
 * peers run on one kind of host); every record starts with a magic so that a
 * stray client or a desynchronised stream is recognised at once.
 *
 * Setup: the connector opens one control socket to the address in the
 * handle and sends a HELLO(kind CTRL); the listener answers with a WELCOME
 * listing the addresses its data streams should go to; the connector then
 * opens `nstreams` data sockets, each starting with HELLO(kind DATA), and
 * waits for READY on the control socket: the listener holds them all.
 *
 * Data (receiver driven, as NCCL's grouped receives require): every irecv
 * sends a CTS record over the control socket naming its sequence number and
 * the (tag, size) of each buffer.  A send is matched to a CTS entry by tag
 * and is cut into chunks; each chunk travels on whichever stream takes it
 * first, behind a CHUNK header that says where in which receive it belongs.
 * A receiver whose recent messages were all small holds its CTS records
 * back and writes them in batches (small messages need none); a sender that
 * needs one meanwhile asks with a CTS_WANTED record, and the receiver then
 * writes what it holds and goes back to writing each CTS at once.
 *
 * Small messages (COLLX_EAGER_SIZE) do not wait for a CTS: they travel on the
 * control socket, sender to receiver, as an EAGER record followed by the
 * payload, in send order.  A sender that has the CTS of the receive names
 * it (MATCHED); otherwise the record names the first receive the message may
 * belong to, and both sides match it by tag with the same rule: the oldest
 * receive, from that one on, with a free entry of that tag (see tcp_eager.c).
 * The receiver reads such a record only once that receive is posted, so an
 * early message waits in the socket, and TCP's own flow control bounds it.
 */
#ifndef COLLX_TCP_WIRE_H
#define COLLX_TCP_WIRE_H

#include <stdint.h>
#include <sys/socket.h>

#include "transport/transport.h"
#include "util/netdev.h"

#define WIRE_MAGIC 0x7863u /* "cx" */
#define WIRE_VERSION 9
/* Data streams a connection may have: bit masks of streams fit 16 bits. */
#define WIRE_MAX_STREAMS 16

/* CTRL_AGAIN: with failover, a control socket of a comm coming back with
 * its path (index: its slot, 0 the first, 1 the spare); it carries a RESUME
 * record each way before anything else. */
enum wire_kind { WIRE_HELLO_CTRL = 1, WIRE_HELLO_DATA = 2, WIRE_HELLO_CTRL_AGAIN = 3 };

/* What the connector (the sending side) says of itself in a CTRL hello,
 * and the listener of itself in the welcome's flags: failover is on where
 * both have COLLX_FAILOVER and either side's device is merged. */
enum wire_hello_flags { WIRE_FAILOVER_ON = 1, WIRE_FAILOVER_MERGED = 2 };

struct wire_hello {
  uint16_t magic;
  uint8_t version;
  uint8_t kind;        /* enum wire_kind */
  uint16_t index;      /* data stream index (DATA); enum wire_hello_flags (CTRL); slot (CTRL_AGAIN) */
  uint16_t nstreams;   /* connector's proposal (CTRL) */
  uint64_t secret;     /* from the handle */
  uint64_t conn_id;    /* chosen by the connector, ties streams to their ctrl */
};

struct wire_addr {
  uint16_t family;
  uint16_t port;
  uint32_t scope_id;
  uint8_t addr[16];
};

struct wire_welcome {
  uint16_t magic;
  uint8_t version;
  uint8_t naddrs;
  uint16_t nstreams;   /* what the listener accepts */
  uint16_t flags;      /* enum wire_hello_flags: the listener's */
  struct wire_addr addrs[COLLX_MAX_MEMBERS];
};

/* HEARTBEAT: sent by each side's watchdog thread every second, so that a
 * peer whose process stopped answering is told from one that is merely idle. */
/* READY: the listener's last word in setup, sent once it holds every stream. */
/* CTS_WANTED: sender to receiver, in the eager lane: a send waits for a CTS
 * the receiver may be holding back. */
/* With failover (COLLX_FAILOVER), receiver to sender:
 * DONE: receives that are complete, n sequence numbers in e[i].size; the
 *   sender reports a striped send done only then.
 * LOST_ACK: the receiver has stopped reading the streams in the bit mask
 *   e[0].size (after a LOST notice) and forgotten their partial chunks:
 *   the sender may now send those chunks again on other streams.
 * REJOIN: the receiver listens for new sockets of path `seq` on port
 *   e[0].tag; their hellos must carry the token e[0].size as secret.
 * REJOINED: the streams in the bit mask e[0].size have their new socket
 *   in place: the sender may write on them.
 * CTRL_GONE: receiver to sender, with failover: e[0].size is a mask of
 *   paths (0 and 1) whose control socket the receiver gave up while their
 *   streams stayed in use; the sender gives those paths up, so that they
 *   come back whole, control socket included.
 * RESUME: the first record each end writes on a control socket that comes
 *   back (CTRL_AGAIN), outside the control stream: e[0].size is the byte
 *   of that end's control stream the socket carries from on (the reader
 *   drops what it has read of it from the other socket). */
enum wire_ctrl_type {
  WIRE_CTS = 1,
  WIRE_HEARTBEAT = 2,
  WIRE_READY = 3,
  WIRE_EAGER = 4,
  WIRE_CTS_WANTED = 5,
  WIRE_DONE = 6,
  WIRE_LOST_ACK = 7,
  WIRE_REJOIN = 8,
  WIRE_REJOINED = 9,
  WIRE_RESUME = 10,
  WIRE_CTRL_GONE = 11,
};

struct wire_cts_entry {
  int32_t tag;
  uint32_t reserved;
  uint64_t size;
};

/* Control record: CTS from receiver to sender, CTS_WANTED from sender to
 * receiver, heartbeats both ways. */
struct wire_ctrl {
  uint16_t magic;
  uint8_t type;        /* enum wire_ctrl_type */
  uint8_t n;           /* entries used */
  uint32_t seq;
  struct wire_cts_entry e[COLLX_MAX_RECVS];
};

enum wire_eager_flags { WIRE_EAGER_MATCHED = 1 };

/* EAGER: a small message on the control socket, followed by `size` bytes.
 * MATCHED: seq/idx name the receive entry.  Otherwise seq is the first
 * receive the message may belong to and idx is unused. */
struct wire_eager {
  uint16_t magic;
  uint8_t type;        /* WIRE_EAGER */
  uint8_t flags;       /* enum wire_eager_flags */
  uint32_t seq;
  int32_t tag;
  uint8_t idx;
  uint8_t reserved[3];
  uint64_t size;
};

/* Largest eager message a receiver accepts, whatever the sender's setting. */
#define WIRE_EAGER_MAX (256 * 1024)

/* HEARTBEAT: sender to receiver on a data stream, between chunks, with
 * seq, total, offset and len all 0: a sign of life that does not queue
 * behind an early eager message the receiver leaves unread on the control
 * socket until its receive is posted. */
/* LOST: sender to receiver on a stream that still works, between chunks,
 * with failover: the streams in the bit mask `total` are given up (their
 * path failed); seq, offset and len are 0. */
/* LAZY_DONE: on a data chunk, with failover: the sender does not wait
 * for this message's DONE (it keeps a copy of it, COLLX_FAILOVER_COPY), so
 * the receiver may send the DONE with the next records it writes, or at
 * its watchdog's next tick, rather than on its own. */
enum wire_chunk_flags {
  WIRE_CHUNK_TRUNCATED = 1,
  WIRE_CHUNK_HEARTBEAT = 2,
  WIRE_CHUNK_LOST = 4,
  WIRE_CHUNK_LAZY_DONE = 8
};

/* Header before each chunk of payload on a data stream. */
struct wire_chunk {
  uint16_t magic;
  uint8_t idx;         /* entry of the receive */
  uint8_t flags;       /* enum wire_chunk_flags */
  uint32_t seq;        /* receive sequence number */
  uint64_t total;      /* size of the whole message (the sender's size if TRUNCATED) */
  uint64_t offset;
  uint64_t len;
};

_Static_assert(sizeof(struct wire_hello) == 24, "hello layout");
_Static_assert(sizeof(struct wire_welcome) == 8 + 24 * COLLX_MAX_MEMBERS, "welcome layout");
_Static_assert(sizeof(struct wire_chunk) == 32, "chunk layout");
_Static_assert(sizeof(struct wire_ctrl) == 8 + 16 * COLLX_MAX_RECVS, "ctrl layout");
_Static_assert(sizeof(struct wire_eager) == 24, "eager layout");

/* Validators (wire.c).  Each returns -1 with *why set when the record must
 * be refused. */
/* A RESUME record: 0, or -1 with *why. */
int wire_resume_check(const struct wire_ctrl *m, const char **why);
/* Returns the hello's kind (enum wire_kind). */
int wire_hello_check(const struct wire_hello *h, uint64_t secret, const char **why);
int wire_welcome_check(const struct wire_welcome *w, int max_streams, const char **why);
/* Returns the record's type; to_sender: we are the sending side. */
int wire_ctrl_check(const struct wire_ctrl *m, int to_sender, const char **why);
/* The receiving side's check of an EAGER record's own fields (which
 * receive it lands in is checked where receives are known). */
int wire_eager_check(const struct wire_eager *h, const char **why);
/* cap: size of the receive buffer the chunk names. */
int wire_chunk_check(const struct wire_chunk *h, uint64_t cap, const char **why);

#endif
