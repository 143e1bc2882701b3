/* netbench's native delay line: the same job as delayline.py at a fraction of its CPU per packet.
 *
 * Why it exists: the Python delay line costs 30-45 us of CPU per packet, so at 100 Mbit/s it takes a
 * fifth of a core, which on a small host it takes from the emulated nodes. This program
 * does what delayline.py's DelayLine and serve() do, with the same inputs, counters and signals:
 *
 *   delayline STATS_PATH SEED [control=PATH] [up|down:IFINDEX:DELAY_S:JITTER_S:LOSS ...]
 *
 * With control=PATH it re-reads the ports from PATH (same form, one per line) on SIGHUP: a link schedule
 * changing delay, jitter or loss while packets flow (netbench.emulation.delaycontrol).
 *
 * Per packet (queued by the switch namespace's NFQUEUE rules): delay = up[in_port] + down[out_port]
 * (+ Gaussian jitter, truncated at zero), dropped with probability 1 - (1 - loss_up)(1 - loss_down);
 * release times monotonic per port pair, so jitter never reorders a flow; arrival anchored on the
 * kernel's receive timestamp, which it switches on for the host while it runs (SO_TIMESTAMP: without it no
 * packet carries one, and the ~0.1 ms between queueing and this program's read would add to every delay);
 * a sleep of 0.3 ms or more until a release ends early by the wake-up lateness it has measured and spins
 * the rest (sleeps of 1-20 ms on a 2-core VM wake 50-130 us late). Prints "ready" once bound; rewrites
 * STATS_PATH (JSON, in a folder of the run's own:
 * netbench.emulation.delaystats) every second, with the kernel's queue drops beside its own counters; on
 * SIGTERM or SIGINT lets every held packet go, writes the counters once more, prints them and exits 0.
 *
 * Built on first use by netbench.emulation.delayline_native (cc -O2 ... -lnetfilter_queue).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <linux/netlink.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define QUEUE_NUM 0
#define QUEUE_MAX_LEN 200000
#define RCVBUF_BYTES (64 << 20)
#define LATE_S 1e-3     /* a release this much past due counts as late (as delayline.py) */
#define STATS_EVERY_S 1.0
#define SHORT_SLICE_NS 100000ULL /* the fair slice asked for where real-time is not allowed (100 us) */
#define RT_PRIORITY 10 /* SCHED_FIFO priority: above every normal task, below the kernel's own threads */
#define LEAD_FROM_S 300e-6 /* sleeps at least this long wake early by the measured lateness, then spin */
#define LEAD_MAX_S 200e-6  /* the most a sleep ends early (and so the longest spin) */
#define LEAD_SPAN 16       /* the lateness average spans about this many wake-ups (a plain mean until then) */
#define MAX_PORTS 512   /* switch ports with an impairment or traffic: one per node */

struct impairment { int ifindex; double delay_s, jitter_s, loss; };
struct held { double release; uint64_t seq; uint32_t id; };

static struct impairment up[MAX_PORTS], down[MAX_PORTS];
static int n_up, n_down;
static int ports[MAX_PORTS], n_ports;           /* ifindex of each port seen, by port index */
static double *last_release;                     /* [MAX_PORTS * MAX_PORTS]: per (in, out) port pair */
static struct held *heap;
static size_t heap_len, heap_cap;
static uint64_t seq;
static int fifo = 1;          /* every held packet's release order is its id order: one batch verdict frees a prefix */
static double fifo_last;      /* the latest release time pushed while fifo holds */
static unsigned long long passed, dropped, late;
static double late_sum_s, late_max_s;
static uint64_t rng_state;
static volatile sig_atomic_t stop;
static double lead_s;          /* running mean of how late a timed sleep of LEAD_FROM_S or more woke */
static unsigned lead_samples;

static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double real_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t next_random(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double uniform(void) { return (next_random() >> 11) * 0x1.0p-53; }

static double gauss(double mean, double sigma) { /* Box-Muller */
    double u = uniform(), v = uniform();
    return mean + sigma * sqrt(-2.0 * log(u > 0 ? u : 1e-300)) * cos(2 * M_PI * v);
}

static const struct impairment *find(const struct impairment *table, int n, int ifindex) {
    static const struct impairment none = {0, 0.0, 0.0, 0.0};
    for (int i = 0; i < n; i++)
        if (table[i].ifindex == ifindex) return &table[i];
    return &none;
}

static int port_index(int ifindex) {
    for (int i = 0; i < n_ports; i++)
        if (ports[i] == ifindex) return i;
    if (n_ports == MAX_PORTS) return MAX_PORTS - 1; /* more ports than a cluster has: share the last slot */
    ports[n_ports] = ifindex;
    return n_ports++;
}

static int earlier(const struct held *a, const struct held *b) {
    return a->release < b->release || (a->release == b->release && a->seq < b->seq);
}

static void heap_push(struct held item) {
    if (heap_len == heap_cap) {
        heap_cap = heap_cap ? 2 * heap_cap : 4096;
        heap = realloc(heap, heap_cap * sizeof *heap);
        if (!heap) { perror("delay line: out of memory"); exit(1); }
    }
    size_t i = heap_len++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!earlier(&item, &heap[parent])) break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = item;
}

static struct held heap_pop(void) {
    struct held top = heap[0], last = heap[--heap_len];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= heap_len) break;
        if (child + 1 < heap_len && earlier(&heap[child + 1], &heap[child])) child++;
        if (!earlier(&heap[child], &last)) break;
        heap[i] = heap[child];
        i = child;
    }
    if (heap_len) heap[i] = last;
    return top;
}

static double arrival(struct nfq_data *nfa) {
    /* When the kernel queued the packet, on the monotonic clock: keeps the wake-up out of the delay. */
    double now = mono_now();
    struct timeval tv;
    if (nfq_get_timestamp(nfa, &tv) != 0) return now;
    double age = real_now() - (tv.tv_sec + tv.tv_usec * 1e-6);
    return (age >= 0 && age < 0.05) ? now - age : now;
}

static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa, void *data) {
    (void)msg, (void)data;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    if (!ph) return 0;
    uint32_t id = ntohl(ph->packet_id);
    double now = arrival(nfa);
    int src = (int)nfq_get_indev(nfa), dst = (int)nfq_get_outdev(nfa);
    const struct impairment *a = find(up, n_up, src), *b = find(down, n_down, dst);
    if ((a->loss > 0 || b->loss > 0) && uniform() >= (1 - a->loss) * (1 - b->loss)) {
        nfq_set_verdict(qh, id, NF_DROP, 0, NULL);
        dropped++;
        return 0;
    }
    double delay = a->delay_s + b->delay_s;
    double jitter = sqrt(a->jitter_s * a->jitter_s + b->jitter_s * b->jitter_s);
    if (jitter > 0) {
        delay = gauss(delay, jitter);
        if (delay < 0) delay = 0;
    }
    double *last = &last_release[port_index(src) * MAX_PORTS + port_index(dst)];
    double release = now + delay > *last ? now + delay : *last;
    *last = release;
    if (heap_len == 0) fifo = 1, fifo_last = release;
    else if (fifo && release < fifo_last) fifo = 0; /* released before an older packet: verdicts one by one */
    else if (fifo) fifo_last = release;
    heap_push((struct held){release, ++seq, id});
    return 0;
}

static double release_due(struct nfq_q_handle *qh) {
    /* Accept every packet whose time has come; return seconds until the next one (-1: none held). */
    double now = mono_now();
    int batch = fifo;
    uint32_t last_id = 0;
    size_t released = 0;
    while (heap_len && heap[0].release <= now) {
        struct held pkt = heap_pop();
        if (batch) last_id = pkt.id;
        else nfq_set_verdict(qh, pkt.id, NF_ACCEPT, 0, NULL);
        released++;
        passed++;
        double behind = now - pkt.release;
        if (behind > LATE_S) {
            late++;
            late_sum_s += behind;
            if (behind > late_max_s) late_max_s = behind;
        }
    }
    if (batch && released) nfq_set_verdict_batch(qh, last_id, NF_ACCEPT); /* ids up to last_id: exactly those popped */
    return heap_len ? heap[0].release - now : -1.0;
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* After a sleep that was asked to end at `asked` (early by lead_s): learn how late it woke, and spin until the
   next release is due. The spin is at most lead_s; a packet that arrives meanwhile keeps its kernel timestamp. */
static void after_lead(double asked) {
    double woke = mono_now();
    if (lead_samples < LEAD_SPAN) lead_samples++;
    lead_s += ((woke - asked) - lead_s) / lead_samples;
    if (lead_s < 0) lead_s = 0;
    if (lead_s > LEAD_MAX_S) lead_s = LEAD_MAX_S;
    while (heap_len && mono_now() < heap[0].release) cpu_relax();
}

static unsigned long long queue_dropped, queue_user_dropped; /* the kernel's: lost before this program saw them */
static int queue_counted;

static void read_queue_counters(void) {
    /* queue 0's row of the kernel's table (this network namespace's): queue, peer port id, queued now, copy mode,
       copy range, dropped (queue full), user dropped (receive buffer full: the drops NETLINK_NO_ENOBUFS keeps quiet) */
    FILE *fh = fopen("/proc/self/net/netfilter/nfnetlink_queue", "re");
    if (!fh) return;
    unsigned int num, portid, total, mode, range;
    unsigned long long full, user;
    while (fscanf(fh, "%u %u %u %u %u %llu %llu %*[^\n]", &num, &portid, &total, &mode, &range, &full, &user) == 7)
        if (num == QUEUE_NUM) { queue_dropped = full, queue_user_dropped = user, queue_counted = 1; break; }
    fclose(fh);
}

static void print_stats(FILE *out) {
    fprintf(out, "{\"passed\": %llu, \"dropped\": %llu, \"late\": %llu, \"late_sum_s\": %.9g, \"late_max_s\": %.9g",
            passed, dropped, late, late_sum_s, late_max_s);
    if (queue_counted) fprintf(out, ", \"queue_dropped\": %llu, \"queue_user_dropped\": %llu", queue_dropped, queue_user_dropped);
    fprintf(out, "}");
}

static void write_stats(const char *path) {
    /* Replace path with the counters: a fresh name (mkstemp: O_CREAT|O_EXCL, so never through a planted link),
       renamed into place (a reader never sees half a file). */
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= (int)sizeof tmp) return;
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) return;
    FILE *fh = fdopen(fd, "w");
    if (!fh) { close(fd); unlink(tmp); return; }
    print_stats(fh);
    if (fclose(fh) != 0 || rename(tmp, path) != 0) unlink(tmp);
}

static void on_signal(int sig) { (void)sig; stop = 1; }

static int set_port(struct impairment *ports, int *n, struct impairment imp) {
    for (int i = 0; i < *n; i++)
        if (ports[i].ifindex == imp.ifindex) { ports[i] = imp; return 0; }
    if (*n >= MAX_PORTS) return -1;
    ports[(*n)++] = imp;
    return 0;
}

static int parse_port(const char *arg) {
    char side[8];
    struct impairment imp;
    if (sscanf(arg, "%7[a-z]:%d:%lf:%lf:%lf", side, &imp.ifindex, &imp.delay_s, &imp.jitter_s, &imp.loss) != 5) return -1;
    if (!strcmp(side, "up")) return set_port(up, &n_up, imp);
    if (!strcmp(side, "down")) return set_port(down, &n_down, imp);
    return -1;
}

static volatile sig_atomic_t reload_asked;
static void on_reload(int sig) { (void)sig; reload_asked = 1; }

/* Re-read the ports from the control file (regular files only, never through a link); held packets keep their release. */
static void reload_control(const char *path) {
    reload_asked = 0;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) { perror("delay line: control file"); return; }
    struct stat st;
    FILE *fh = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? fdopen(fd, "r") : NULL;
    if (!fh) { close(fd); fprintf(stderr, "delay line: control file is not a regular file\n"); return; }
    char line[256];
    while (fgets(line, sizeof line, fh))
        if (line[0] != '\n' && parse_port(line) != 0) fprintf(stderr, "delay line: bad control line %s", line);
    fclose(fh);
}

/* sched_setattr's argument (SCHED_ATTR_SIZE_VER0): glibc has no wrapper */
struct fair_attr {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
};

/* Run ahead of the workers: a release waits for a core otherwise, and a busy host makes the line late
   (and fidelity flags it). Real-time where allowed (root). Elsewhere a higher share where allowed, and a short slice,
   which any user may ask for: EEVDF (Linux 6.12+) lets a task that wakes with a shorter slice preempt the
   running one, where a user namespace's delay line otherwise waited 13-15 % of a run for a core, behind
   workers that had lowered themselves to nice 19 even (kernels before 6.12 ignore the request). */
static void run_ahead(void) {
    struct sched_param rt = {.sched_priority = RT_PRIORITY};
    if (sched_setscheduler(0, SCHED_FIFO, &rt) == 0) return;
    int nice = setpriority(PRIO_PROCESS, 0, -10) == 0 ? -10 : getpriority(PRIO_PROCESS, 0);
#ifdef SYS_sched_setattr
    struct fair_attr attr = {.size = sizeof attr, .policy = SCHED_OTHER, .nice = nice, .runtime = SHORT_SLICE_NS};
    syscall(SYS_sched_setattr, 0, &attr, 0);
#endif
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s STATS_PATH SEED [control=PATH] [up|down:IFINDEX:DELAY_S:JITTER_S:LOSS ...]\n", argv[0]);
        return 2;
    }
    const char *stats_path = argv[1][0] ? argv[1] : NULL;
    const char *control_path = NULL;
    rng_state = strtoull(argv[2], NULL, 10);
    for (int i = 3; i < argc; i++) {
        if (!strncmp(argv[i], "control=", 8)) { control_path = argv[i] + 8; continue; }
        if (parse_port(argv[i]) != 0) { fprintf(stderr, "delay line: bad port spec %s\n", argv[i]); return 2; }
    }
    last_release = calloc((size_t)MAX_PORTS * MAX_PORTS, sizeof *last_release);
    if (!last_release) { perror("delay line: out of memory"); return 1; }

    sigset_t blocked, during_poll;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGTERM);
    sigaddset(&blocked, SIGINT);
    sigaddset(&blocked, SIGHUP);
    sigprocmask(SIG_BLOCK, &blocked, &during_poll); /* delivered only inside ppoll: no lost wake-up */
    sigdelset(&during_poll, SIGTERM);
    sigdelset(&during_poll, SIGINT);
    sigdelset(&during_poll, SIGHUP);
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    struct sigaction hup = {0};
    hup.sa_handler = on_reload;
    sigaction(SIGHUP, &hup, NULL);

    struct nfq_handle *h = nfq_open();
    if (!h) { perror("delay line: nfq_open"); return 1; }
    struct nfq_q_handle *qh = nfq_create_queue(h, QUEUE_NUM, on_packet, NULL);
    if (!qh) { perror("delay line: cannot bind queue 0"); return 1; }
    if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0) { perror("delay line: nfq_set_mode"); return 1; }
    nfq_set_queue_maxlen(qh, QUEUE_MAX_LEN);
    int fd = nfq_fd(h);
    int size = RCVBUF_BYTES, on = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) < 0) /* needs CAP_NET_ADMIN */
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &on, sizeof on); /* overflow is counted by the kernel instead */
    /* Receive timestamps on (host-wide while any socket asks, as tcpdump does): the queue then hands over each
       packet's arrival time, so the wait for this program to read it is part of the delay, not added to it. */
    setsockopt(fd, SOL_SOCKET, SO_TIMESTAMP, &on, sizeof on);
    prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0); /* 1 ns timer slack (default 50 us): wake-ups end when asked */
    run_ahead();
    printf("ready\n");
    fflush(stdout);

    static char buf[1 << 16] __attribute__((aligned));
    double next_stats = mono_now() + STATS_EVERY_S;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    while (!stop) {
        if (reload_asked && control_path) reload_control(control_path);
        if (stats_path && mono_now() >= next_stats) {
            read_queue_counters();
            write_stats(stats_path);
            next_stats = mono_now() + STATS_EVERY_S;
        }
        double wait = release_due(qh);
        double timeout = wait < 0 ? 0.2 : wait;
        int lead = wait >= LEAD_FROM_S && wait <= STATS_EVERY_S; /* a long sleep wakes late: end it early */
        if (lead) timeout -= lead_s;
        if (timeout > STATS_EVERY_S) timeout = STATS_EVERY_S;
        double asked = mono_now() + timeout;
        struct timespec ts = {.tv_sec = (time_t)timeout, .tv_nsec = (long)((timeout - (time_t)timeout) * 1e9)};
        int ready = ppoll(&pfd, 1, &ts, &during_poll);
        if (ready == 0 && lead) after_lead(asked);
        if (ready <= 0) continue;
        for (;;) { /* drain the socket: every queued packet's message, without blocking */
            ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
            if (n < 0) break;
            nfq_handle_packet(h, buf, (int)n);
        }
    }
    while (heap_len) nfq_set_verdict(qh, heap_pop().id, NF_ACCEPT, 0, NULL); /* let what is in flight go */
    read_queue_counters(); /* while the queue is bound: its kernel counters go with it */
    nfq_destroy_queue(qh);
    nfq_close(h);
    if (stats_path) write_stats(stats_path);
    print_stats(stdout);
    printf("\n");
    return 0;
}
