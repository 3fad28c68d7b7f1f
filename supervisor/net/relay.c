/* The TCP relay of user mode (dome_net_config.tcp_relay): jails' TCP flows are handed by nftables
 * `tproxy` (prerouting of the egress namespace) to a transparent listening socket there, after the jail's
 * chain accepted them at `input`; the relay connects to the original destination from the supervisor's
 * own namespace and moves the bytes with splice(2) through a pipe each way — no copy through user space,
 * unlike pasta's tap path (docs/networking.md has the measurements). IPv6 TCP too when the egress side has
 * IPv6; UDP stays on pasta.
 *
 * Threads: one accept thread; per connection one thread that connects out and pumps jail -> peer, and one
 * that pumps peer -> jail (64 KiB stacks). Bounded: RELAY_MAX_CONNECTIONS in all and RELAY_MAX_PER_JAIL per
 * jail (more are reset).
 * Semantics: the jail's handshake completes before the outgoing connect; a permitted peer that refuses or
 * does not answer (RELAY_CONNECT_TIMEOUT_S) shows as a reset of the accepted connection. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "supervisor/net/net_internal.h"

#define RELAY_MAX_CONNECTIONS 1024
#define RELAY_MAX_PER_JAIL 256 /* one jail cannot take every connection of the others */
#define RELAY_CONNECT_TIMEOUT_S 10
#define RELAY_PIPE_BYTES (1 << 20)
#define RELAY_STACK_BYTES (64 * 1024)

struct relay_connection {
  struct relay_connection *next;
  struct net_relay *relay;
  int jail_fd, out_fd;
  uint8_t source[16]; /* the jail's address (IPv4 as ::ffff:a.b.c.d) */
  struct sockaddr_storage destination;
  socklen_t destination_length;
};

struct net_relay {
  int listen_fd[2]; /* IPv4, IPv6 (-1 without IPv6) */
  uint16_t port[2];
  pthread_t acceptor;
  bool acceptor_running;
  pthread_mutex_t lock;
  pthread_cond_t idle;
  struct relay_connection *connections;
  unsigned count;
  bool stopping;
};

struct pump {
  int from, to;
};

static void *pump(void *arg) {
  struct pump *p = arg;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) < 0) {
    shutdown(p->to, SHUT_WR);
    return NULL;
  }
  fcntl(pipe_fds[0], F_SETPIPE_SZ, RELAY_PIPE_BYTES); /* best effort: pipe-max-size may be lower */
  for (;;) {
    ssize_t n = splice(p->from, NULL, pipe_fds[1], NULL, RELAY_PIPE_BYTES, SPLICE_F_MOVE | SPLICE_F_MORE);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    while (n > 0) {
      ssize_t m = splice(pipe_fds[0], NULL, p->to, NULL, (size_t)n, SPLICE_F_MOVE | SPLICE_F_MORE);
      if (m < 0 && errno == EINTR) continue;
      if (m <= 0) goto out;
      n -= m;
    }
  }
out:
  shutdown(p->to, SHUT_WR); /* the other side's end of stream, or its failure */
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  return NULL;
}

static void reset_close(int fd) {
  struct linger linger = {.l_onoff = 1, .l_linger = 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, sizeof linger);
  close(fd);
}

static void *connection_main(void *arg) {
  struct relay_connection *c = arg;
  struct net_relay *relay = c->relay;
  bool connected = false;
  if (c->out_fd >= 0) {
    struct timeval timeout = {RELAY_CONNECT_TIMEOUT_S, 0};
    setsockopt(c->out_fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    connected = connect(c->out_fd, (struct sockaddr *)&c->destination, c->destination_length) == 0;
    timeout.tv_sec = 0;
    setsockopt(c->out_fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  }
  if (connected) {
    struct pump down = {c->out_fd, c->jail_fd}, up = {c->jail_fd, c->out_fd};
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setstacksize(&attributes, RELAY_STACK_BYTES);
    pthread_t other;
    bool started = pthread_create(&other, &attributes, pump, &down) == 0;
    pthread_attr_destroy(&attributes);
    pump(&up);
    if (started)
      pthread_join(other, NULL);
    else
      shutdown(c->jail_fd, SHUT_RDWR);
  }
  pthread_mutex_lock(&relay->lock);
  for (struct relay_connection **p = &relay->connections; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      break;
    }
  if (connected) {
    close(c->jail_fd);
  } else {
    reset_close(c->jail_fd); /* the peer refused or did not answer: the jail sees a reset */
  }
  if (c->out_fd >= 0) close(c->out_fd);
  relay->count--;
  pthread_cond_broadcast(&relay->idle);
  pthread_mutex_unlock(&relay->lock);
  free(c);
  return NULL;
}

/* The jail's address as 16 bytes (IPv4 mapped). */
static void source_key(const struct sockaddr_storage *address, uint8_t key[16]) {
  memset(key, 0, 16);
  if (address->ss_family == AF_INET6) {
    memcpy(key, &((const struct sockaddr_in6 *)address)->sin6_addr, 16);
  } else {
    key[10] = key[11] = 0xff;
    memcpy(key + 12, &((const struct sockaddr_in *)address)->sin_addr, 4);
  }
}

/* One accepted flow: its original destination, an outgoing socket, a connection thread. */
static void relay_accepted(struct net_relay *relay, int fd, const struct sockaddr_storage *source) {
  struct relay_connection *c = calloc(1, sizeof *c);
  if (c == NULL) {
    reset_close(fd);
    return;
  }
  c->destination_length = sizeof c->destination;
  /* tproxy keeps the original destination as the accepted socket's local address */
  if (getsockname(fd, (struct sockaddr *)&c->destination, &c->destination_length) < 0) {
    free(c);
    reset_close(fd);
    return;
  }
  c->relay = relay;
  c->jail_fd = fd;
  source_key(source, c->source);
  /* created in this thread's namespace: the supervisor's (the acceptor was started from it) */
  c->out_fd = socket(c->destination.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  pthread_mutex_lock(&relay->lock);
  unsigned same_jail = 0;
  for (struct relay_connection *o = relay->connections; o; o = o->next)
    same_jail += memcmp(o->source, c->source, 16) == 0;
  int r = EAGAIN;
  if (!relay->stopping && relay->count < RELAY_MAX_CONNECTIONS && same_jail < RELAY_MAX_PER_JAIL) {
    c->next = relay->connections;
    relay->connections = c;
    relay->count++;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setstacksize(&attributes, RELAY_STACK_BYTES);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    r = pthread_create(&thread, &attributes, connection_main, c);
    pthread_attr_destroy(&attributes);
    if (r != 0) {
      relay->connections = c->next;
      relay->count--;
    }
  }
  pthread_mutex_unlock(&relay->lock);
  if (r != 0) {
    reset_close(fd);
    if (c->out_fd >= 0) close(c->out_fd);
    free(c);
  }
}

static void *acceptor_main(void *arg) {
  struct net_relay *relay = arg;
  /* splice(2) into a socket the other side reset raises SIGPIPE, and splice has no MSG_NOSIGNAL: blocked in
   * this thread and so in every connection and pump thread it starts (a thread's pending SIGPIPE goes
   * with it), the pumps see EPIPE instead, whatever the process's own disposition of SIGPIPE is. */
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, NULL);
  for (;;) {
    struct pollfd fds[2] = {{.fd = relay->listen_fd[0], .events = POLLIN},
                            {.fd = relay->listen_fd[1], .events = POLLIN}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) return NULL;
    pthread_mutex_lock(&relay->lock);
    bool stopping = relay->stopping;
    pthread_mutex_unlock(&relay->lock);
    if (stopping) return NULL;
    for (int i = 0; i < 2; i++) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      struct sockaddr_storage source;
      socklen_t length = sizeof source;
      int fd = accept4(fds[i].fd, (struct sockaddr *)&source, &length, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) usleep(10000);
        continue;
      }
      int flags = fcntl(fd, F_GETFL);
      fcntl(fd, F_SETFL, flags & ~O_NONBLOCK); /* the pumps block */
      relay_accepted(relay, fd, &source);
    }
  }
}

struct listen_call {
  int family;
  int fd;
  uint16_t port;
};

/* In the egress namespace (net_in_netns): the transparent listener on an ephemeral port of the family's
 * wildcard address. */
static int make_listener(void *arg, dome_error *err) {
  struct listen_call *call = arg;
  int fd = socket(call->family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return dome_error_set_errno(err, errno, "relay: socket");
  int one = 1;
  struct sockaddr_storage address = {.ss_family = (sa_family_t)call->family};
  socklen_t length = call->family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
  bool v6 = call->family == AF_INET6;
  if ((v6 ? setsockopt(fd, SOL_IPV6, IPV6_V6ONLY, &one, sizeof one) : 0) < 0 ||
      setsockopt(fd, v6 ? SOL_IPV6 : SOL_IP, v6 ? IPV6_TRANSPARENT : IP_TRANSPARENT, &one, sizeof one) < 0 ||
      bind(fd, (struct sockaddr *)&address, length) < 0 || listen(fd, 256) < 0 ||
      getsockname(fd, (struct sockaddr *)&address, &length) < 0) {
    int e = errno;
    close(fd);
    return dome_error_set_errno(err, e, "relay: transparent listener");
  }
  call->fd = fd;
  call->port =
      ntohs(v6 ? ((struct sockaddr_in6 *)&address)->sin6_port : ((struct sockaddr_in *)&address)->sin_port);
  return 0;
}

static int local_delivery(void *arg, dome_error *err) {
  const bool *ipv6 = arg;
  struct nl_sock *sock = NULL;
  int r = net_nl_open(&sock, err);
  if (r < 0) return r;
  r = net_tproxy_routing(sock, AF_INET, NET_RELAY_MARK, NET_RELAY_TABLE, err);
  if (r >= 0 && *ipv6) r = net_tproxy_routing(sock, AF_INET6, NET_RELAY_MARK, NET_RELAY_TABLE, err);
  net_nl_close(sock);
  return r;
}

int net_relay_start(struct dome_net *net, dome_error *err) {
  struct net_relay *relay = calloc(1, sizeof *relay);
  if (relay == NULL) return dome_error_set(err, ENOMEM, "relay: out of memory");
  relay->listen_fd[0] = relay->listen_fd[1] = -1;
  pthread_mutex_init(&relay->lock, NULL);
  pthread_cond_init(&relay->idle, NULL);
  net->relay = relay;
  int r;
  for (int i = 0; i < (net->ipv6 ? 2 : 1); i++) {
    struct listen_call call = {i == 0 ? AF_INET : AF_INET6, -1, 0};
    if ((r = net_in_netns(net->egress_netns_fd, make_listener, &call, err)) < 0)
      return dome_error_wrap(err, "TCP relay");
    relay->listen_fd[i] = call.fd;
    relay->port[i] = call.port;
  }
  if ((r = net_in_netns(net->egress_netns_fd, local_delivery, &net->ipv6, err)) < 0)
    return dome_error_wrap(err, "TCP relay");
  char commands[768];
  int n = snprintf(commands, sizeof commands,
                   "add chain inet " DOME_NET_TABLE
                   " prerouting { type filter hook prerouting priority mangle; policy accept; }\n"
                   "add rule inet " DOME_NET_TABLE " prerouting iifname \"" DOME_NET_LINK_PREFIX
                   "*\" meta nfproto ipv4 meta l4proto tcp tproxy ip to :%u meta mark set %#x accept\n",
                   relay->port[0], NET_RELAY_MARK);
  if (net->ipv6 && n > 0 && (size_t)n < sizeof commands)
    snprintf(commands + n, sizeof commands - (size_t)n,
             "add rule inet " DOME_NET_TABLE " prerouting iifname \"" DOME_NET_LINK_PREFIX
             "*\" meta nfproto ipv6 meta l4proto tcp tproxy ip6 to :%u meta mark set %#x accept\n",
             relay->port[1], NET_RELAY_MARK);
  if ((r = net_nft_run(net->egress_nft, commands, err)) < 0) return dome_error_wrap(err, "TCP relay");
  if ((r = pthread_create(&relay->acceptor, NULL, acceptor_main, relay)) != 0)
    return dome_error_set_errno(err, r, "TCP relay: start the accept thread");
  relay->acceptor_running = true;
  return 0;
}

void net_relay_drop_source(struct net_relay *relay, uint32_t source, const uint8_t *source6) {
  if (relay == NULL) return;
  uint8_t key[16] = {[10] = 0xff, [11] = 0xff};
  uint32_t network = htonl(source);
  memcpy(key + 12, &network, 4);
  pthread_mutex_lock(&relay->lock);
  for (struct relay_connection *c = relay->connections; c; c = c->next)
    if (memcmp(c->source, key, 16) == 0 || (source6 && memcmp(c->source, source6, 16) == 0)) {
      shutdown(c->jail_fd, SHUT_RDWR);
      if (c->out_fd >= 0) shutdown(c->out_fd, SHUT_RDWR);
    }
  pthread_mutex_unlock(&relay->lock);
}

void net_relay_stop(struct net_relay *relay) {
  if (relay == NULL) return;
  pthread_mutex_lock(&relay->lock);
  relay->stopping = true;
  pthread_mutex_unlock(&relay->lock);
  for (int i = 0; i < 2; i++)
    if (relay->listen_fd[i] >= 0) shutdown(relay->listen_fd[i], SHUT_RDWR); /* wakes poll */
  if (relay->acceptor_running) pthread_join(relay->acceptor, NULL);
  pthread_mutex_lock(&relay->lock);
  for (struct relay_connection *c = relay->connections; c; c = c->next) {
    shutdown(c->jail_fd, SHUT_RDWR);
    if (c->out_fd >= 0) shutdown(c->out_fd, SHUT_RDWR);
  }
  while (relay->count > 0) pthread_cond_wait(&relay->idle, &relay->lock);
  pthread_mutex_unlock(&relay->lock);
  for (int i = 0; i < 2; i++)
    if (relay->listen_fd[i] >= 0) close(relay->listen_fd[i]);
  pthread_cond_destroy(&relay->idle);
  pthread_mutex_destroy(&relay->lock);
  free(relay);
}
