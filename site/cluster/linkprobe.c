/* linkprobe: raw TCP between two nodes of the emulated cluster, for the link-rate check and
 * the socket-buffer and MTU sweeps (site/cluster/linkprobe.py drives it; docs/cluster.md).
 *
 *   linkprobe serve PORTFILE [--sockbuf B] [--mss M]
 *       listen on an ephemeral port of every address, write the port to PORTFILE (then rename,
 *       so a reader never sees half of it), serve one connection: a stream (read to EOF, then
 *       one byte back) or a ping-pong (echo each message), as the client's first 16 bytes say.
 *   linkprobe stream HOST PORT --seconds S [--sockbuf B] [--mss M] [--chunk BYTES]
 *       send for S seconds in writes of CHUNK bytes (default 1 MiB), shut the write side and
 *       wait for the server's byte: the time covers every byte's arrival. Prints one JSON line
 *       {"mode":"stream","bytes":N,"seconds":T,"MBps":...}.
 *   linkprobe pingpong HOST PORT --size BYTES --reps R [--sockbuf B] [--mss M]
 *       R round trips of SIZE bytes each way (after 2 untimed); prints the JSON line with the
 *       median and least half round trip in us and the bandwidth at the median.
 *
 * --sockbuf sets SO_SNDBUF and SO_RCVBUF on both ends before connect/listen (the kernel then
 * holds twice the value; 0 leaves the node's tcp_rmem/tcp_wmem autotuning). --mss sets
 * TCP_MAXSEG before connect/listen, so both ends advertise and use that segment size: the
 * segment an MTU would give (MTU - 52 with timestamps), on an interface whose MTU allows it.
 * The peer address must be in 198.18.0.0/15 or loopback: nothing else is ever addressed. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
    fprintf(stderr, "linkprobe: %s: %s\n", what, strerror(errno));
    exit(1);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void tune(int fd, long sockbuf, long mss)
{
    int v;
    if (sockbuf > 0) {
        v = (int)sockbuf;
        if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v) ||
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v))
            die("setsockopt SO_SNDBUF/SO_RCVBUF");
    }
    if (mss > 0) {
        v = (int)mss;
        if (setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &v, sizeof v))
            die("setsockopt TCP_MAXSEG");
    }
    v = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, sizeof v))
        die("setsockopt TCP_NODELAY");
}

static void full(int fd, char *buf, size_t n, int writing)
{
    while (n) {
        ssize_t k = writing ? write(fd, buf, n) : read(fd, buf, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            die(writing ? "write" : "read");
        if (k == 0) {
            fprintf(stderr, "linkprobe: peer closed early\n");
            exit(1);
        }
        buf += k;
        n -= (size_t)k;
    }
}

static int allowed(struct in_addr a)
{
    uint32_t h = ntohl(a.s_addr);
    return (h >> 24) == 127 || (h >> 17) == (0xC612u >> 1);   /* 127/8, 198.18.0.0/15 */
}

struct hello { char mode[8]; int64_t size; };

static void serve(const char *portfile, long sockbuf, long mss)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t sl = sizeof sa;
    if (ls < 0)
        die("socket");
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    tune(ls, sockbuf, mss);
    if (bind(ls, (struct sockaddr *)&sa, sizeof sa) || listen(ls, 1) ||
        getsockname(ls, (struct sockaddr *)&sa, &sl))
        die("bind/listen");
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", portfile);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%d\n", ntohs(sa.sin_port)) < 0 || fclose(f) || rename(tmp, portfile))
        die(portfile);
    struct sockaddr_in peer;
    sl = sizeof peer;
    int fd = accept(ls, (struct sockaddr *)&peer, &sl);
    if (fd < 0)
        die("accept");
    if (!allowed(peer.sin_addr)) {
        fprintf(stderr, "linkprobe: refused a peer outside 198.18.0.0/15 and loopback\n");
        exit(1);
    }
    struct hello h;
    full(fd, (char *)&h, sizeof h, 0);
    size_t bufsz = h.size > 0 && h.size < (1L << 28) ? (size_t)h.size : 1 << 20;
    char *buf = malloc(bufsz);
    if (!buf)
        die("malloc");
    if (!strcmp(h.mode, "stream")) {
        for (;;) {
            ssize_t k = read(fd, buf, bufsz);
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0)
                die("read");
            if (k == 0)
                break;
        }
        full(fd, buf, 1, 1);
    } else {
        for (;;) {
            ssize_t k = read(fd, buf, 1);          /* a message's first byte, or EOF */
            if (k == 0)
                break;
            if (k < 0)
                die("read");
            full(fd, buf + 1, bufsz - 1, 0);
            full(fd, buf, bufsz, 1);
        }
    }
    close(fd);
    close(ls);
}

static int dial(const char *host, const char *port, long sockbuf, long mss)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, port, &hints, &ai)) {
        fprintf(stderr, "linkprobe: cannot resolve %s\n", host);
        exit(2);
    }
    struct sockaddr_in *sa = (struct sockaddr_in *)ai->ai_addr;
    if (!allowed(sa->sin_addr)) {
        fprintf(stderr, "linkprobe: %s is outside 198.18.0.0/15 and loopback: refused\n", host);
        exit(2);
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die("socket");
    tune(fd, sockbuf, mss);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen))
        die("connect");
    freeaddrinfo(ai);
    return fd;
}

static void report_socket(int fd, const char *tail)
{
    int snd = 0, rcv = 0, seg = 0;
    socklen_t l = sizeof snd;
    getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, &l);
    l = sizeof rcv;
    getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, &l);
    l = sizeof seg;
    getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &seg, &l);
    printf(",\"sndbuf_bytes\":%d,\"rcvbuf_bytes\":%d,\"mss_bytes\":%d%s\n", snd, rcv, seg, tail);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long sockbuf = 0, mss = 0, chunk = 1 << 20, size = 1 << 20, reps = 20;
    double seconds = 2;
    if (argc < 3) {
        fprintf(stderr, "usage: linkprobe serve PORTFILE | stream HOST PORT | pingpong HOST "
                        "PORT [--sockbuf B] [--mss M] [--seconds S] [--chunk B] [--size B] "
                        "[--reps R]\n");
        return 2;
    }
    int first = !strcmp(argv[1], "serve") ? 3 : 4;
    for (int i = first; i < argc; i++) {
        if (i + 1 >= argc) {
            fprintf(stderr, "linkprobe: %s needs a value\n", argv[i]);
            return 2;
        }
        char *end;
        double v = strtod(argv[i + 1], &end);
        if (*end || v < 0) {
            fprintf(stderr, "linkprobe: %s %s: not a number >= 0\n", argv[i], argv[i + 1]);
            return 2;
        }
        if (!strcmp(argv[i], "--sockbuf")) sockbuf = (long)v;
        else if (!strcmp(argv[i], "--mss")) mss = (long)v;
        else if (!strcmp(argv[i], "--seconds")) seconds = v;
        else if (!strcmp(argv[i], "--chunk") && v >= 1) chunk = (long)v;
        else if (!strcmp(argv[i], "--size") && v >= 1) size = (long)v;
        else if (!strcmp(argv[i], "--reps") && v >= 1) reps = (long)v;
        else {
            fprintf(stderr, "linkprobe: unknown option %s\n", argv[i]);
            return 2;
        }
        i++;
    }
    if (!strcmp(argv[1], "serve")) {
        serve(argv[2], sockbuf, mss);
        return 0;
    }
    if (argc < 4)
        return 2;
    int fd = dial(argv[2], argv[3], sockbuf, mss);
    int stream = !strcmp(argv[1], "stream");
    struct hello h = {.size = stream ? chunk : size};
    snprintf(h.mode, sizeof h.mode, "%s", stream ? "stream" : "pp");
    full(fd, (char *)&h, sizeof h, 1);
    char *buf = malloc(stream ? chunk : size);
    if (!buf)
        die("malloc");
    memset(buf, 0x5a, stream ? chunk : size);
    if (stream) {
        double t0 = now(), t1;
        long long sent = 0;
        while (now() - t0 < seconds) {
            full(fd, buf, (size_t)chunk, 1);
            sent += chunk;
        }
        shutdown(fd, SHUT_WR);
        full(fd, buf, 1, 0);
        t1 = now();
        printf("{\"mode\":\"stream\",\"bytes\":%lld,\"seconds\":%.6f,\"MBps\":%.3f",
               sent, t1 - t0, sent / (t1 - t0) / 1e6);
        report_socket(fd, "}");
    } else {
        double *t = malloc(sizeof(double) * (size_t)reps);
        for (long i = -2; i < reps; i++) {
            double t0 = now();
            full(fd, buf, (size_t)size, 1);
            full(fd, buf, (size_t)size, 0);
            if (i >= 0)
                t[i] = (now() - t0) / 2 * 1e6;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp);
        double med = reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2;
        printf("{\"mode\":\"pingpong\",\"size_bytes\":%ld,\"reps\":%ld,\"median_us\":%.3f,"
               "\"min_us\":%.3f,\"MBps\":%.3f", size, reps, med, t[0], size / med);
        report_socket(fd, "}");
    }
    close(fd);
    return 0;
}
