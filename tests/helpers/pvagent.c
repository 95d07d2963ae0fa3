/* pvagent: the small "agent" the integration tests run under pvisor.
 *
 * Usage: pvagent ACTION [ARGS...]
 *   exit N                 exit with status N
 *   signal N               kill itself with signal N
 *   daemon PIDFILE         double-fork + setsid a sleeper, write its pid, exit 0
 *   bg PIDFILE             fork a sleeper in our process group, write its pid, exit 0
 *   wait-signal FILE       write "ready" to FILE, wait for SIGTERM/SIGINT/SIGHUP, write
 *                          the signal number to FILE, exit 0
 *   env NAME               print $NAME (or "<unset>")
 *   pgid                   print "pid pgid sid"
 *   agent REQUEST...       send each REQUEST as one line to $PVISOR_AGENT_SOCKET, print
 *                          each reply line; exit 0 if every reply starts with "ok" or is
 *                          not an error, 1 otherwise, 2 if the socket is unreachable
 *   churn DIR STOPFILE     until STOPFILE exists, rewrite DIR/inplace-K (K < 8) with one
 *                          4096-byte pwrite at offset 0 of a single repeated letter, and
 *                          replace DIR/renamed-K by a 256 KiB file of one letter written
 *                          to DIR/tmp-K in 4 KiB pieces then renamed over it; a
 *                          generation's letter is 'a' + gen % 26; print the generations
 *   forks N SECONDS        fork up to N (<= 10000) children that sleep at most SECONDS,
 *                          print "forked=X failed=Y", kill and reap them, exit 0
 *   alloc MIB              allocate and touch MIB mebibytes; print "allocated" and
 *                          exit 0, or print "alloc-failed" and exit 3
 *   spin SECONDS [N]       burn CPU for at most SECONDS of wall time in N processes
 *                          (default 1), print "spun", exit 0
 * Static so the same binary also runs inside a synthetic root later.
 */

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "we");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f);
}

static long num(const char *s) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s) {
        fprintf(stderr, "pvagent: bad number '%s'\n", s);
        exit(64);
    }
    return v;
}

/* One request per argument over the agent socket; replies to stdout. */
static int agent(int n, char **reqs) {
    const char *path = getenv("PVISOR_AGENT_SOCKET");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (!path || strlen(path) >= sizeof sa.sun_path) {
        fprintf(stderr, "pvagent: PVISOR_AGENT_SOCKET unset or too long\n");
        return 2;
    }
    strcpy(sa.sun_path, path);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof sa) < 0) {
        perror("pvagent: connect");
        return 2;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(reqs[i]);
        if (write(s, reqs[i], len) != (ssize_t)len || write(s, "\n", 1) != 1)
            return 2;
        char buf[4200];
        size_t got_n = 0;
        while (got_n < sizeof buf - 1 && (got_n == 0 || buf[got_n - 1] != '\n')) {
            ssize_t r = read(s, buf + got_n, 1); /* byte by byte: stop at this reply's end */
            if (r <= 0)
                break;
            got_n += (size_t)r;
        }
        if (got_n == 0) {
            printf("DISCONNECTED\n");
            return 2;
        }
        buf[got_n] = '\0';
        fputs(buf, stdout);
        fflush(stdout);
        if (strncmp(buf, "error", 5) == 0)
            rc = 1;
    }
    close(s);
    return rc;
}

static int write_all_at(int fd, const char *b, size_t len, off_t off) {
    while (len) {
        ssize_t n = pwrite(fd, b, len, off);
        if (n <= 0)
            return -1;
        b += n;
        len -= (size_t)n;
        off += n;
    }
    return 0;
}

static int churn(const char *dir, const char *stop) {
    static char page[4096];
    char p[4096], t[4096];
    long gen = 0;
    struct stat st;
    while (stat(stop, &st) < 0) {
        memset(page, 'a' + (int)(gen % 26), sizeof page);
        for (int k = 0; k < 8; k++) {
            snprintf(p, sizeof p, "%s/inplace-%d", dir, k);
            int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
            if (fd < 0 || pwrite(fd, page, sizeof page, 0) != (ssize_t)sizeof page)
                return 70;
            close(fd);
            snprintf(t, sizeof t, "%s/tmp-%d", dir, k);
            snprintf(p, sizeof p, "%s/renamed-%d", dir, k);
            fd = open(t, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (fd < 0)
                return 70;
            for (int i = 0; i < 64; i++)
                if (write_all_at(fd, page, sizeof page, (off_t)i * 4096) < 0)
                    return 70;
            close(fd);
            if (rename(t, p) < 0)
                return 70;
        }
        gen++;
    }
    printf("%ld\n", gen);
    return 0;
}

static volatile sig_atomic_t got;
static void on_sig(int s) {
    got = s;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: pvagent ACTION [ARGS...]\n");
        return 64;
    }
    const char *a = argv[1];
    if (strcmp(a, "exit") == 0 && argc == 3)
        return (int)num(argv[2]);
    if (strcmp(a, "signal") == 0 && argc == 3) {
        int s = (int)num(argv[2]);
        signal(s, SIG_DFL);
        raise(s);
        return 99;
    }
    if ((strcmp(a, "daemon") == 0 || strcmp(a, "bg") == 0) && argc == 3) {
        int p[2];
        if (pipe(p) < 0)
            return 70;
        pid_t c = fork();
        if (c < 0)
            return 70;
        if (c == 0) {
            if (strcmp(a, "daemon") == 0) {
                setsid();
                if (fork() != 0)
                    _exit(0);
            }
            char buf[32];
            snprintf(buf, sizeof buf, "%d\n", (int)getpid());
            write_file(argv[2], buf);
            close(p[0]);
            (void)!write(p[1], "x", 1);
            close(p[1]);
            for (;;)
                pause();
        }
        close(p[1]);
        char x;
        (void)!read(p[0], &x, 1); /* wait until the pid file is written */
        return 0;
    }
    if (strcmp(a, "wait-signal") == 0 && argc == 3) {
        struct sigaction sa = {.sa_handler = on_sig};
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        write_file(argv[2], "ready\n");
        while (!got)
            pause();
        char buf[32];
        snprintf(buf, sizeof buf, "%d\n", (int)got);
        write_file(argv[2], buf);
        return 0;
    }
    if (strcmp(a, "env") == 0 && argc == 3) {
        const char *v = getenv(argv[2]);
        printf("%s\n", v ? v : "<unset>");
        return 0;
    }
    if (strcmp(a, "pgid") == 0 && argc == 2) {
        printf("%d %d %d\n", (int)getpid(), (int)getpgid(0), (int)getsid(0));
        return 0;
    }
    if (strcmp(a, "agent") == 0 && argc >= 3)
        return agent(argc - 2, argv + 2);
    if (strcmp(a, "churn") == 0 && argc == 4)
        return churn(argv[2], argv[3]);
    if (strcmp(a, "forks") == 0 && argc == 4) {
        long n = num(argv[2]), secs = num(argv[3]);
        if (n < 1 || n > 10000 || secs < 1 || secs > 600)
            return 64;
        static pid_t kids[10000];
        long forked = 0, failed = 0;
        for (long i = 0; i < n; i++) {
            pid_t c = fork();
            if (c == 0) {
                alarm((unsigned)secs); /* bounded even if we are killed */
                for (;;)
                    pause();
            }
            if (c < 0)
                failed++;
            else
                kids[forked++] = c;
        }
        printf("forked=%ld failed=%ld\n", forked, failed);
        fflush(stdout);
        for (long i = 0; i < forked; i++)
            kill(kids[i], SIGKILL);
        while (wait(NULL) > 0)
            ;
        return 0;
    }
    if (strcmp(a, "alloc") == 0 && argc == 3) {
        long mib = num(argv[2]);
        char *m = mib > 0 ? malloc((size_t)mib << 20) : NULL;
        if (!m) {
            printf("alloc-failed\n");
            return 3;
        }
        for (long i = 0; i < mib << 20; i += 4096)
            m[i] = 1;
        printf("allocated\n");
        return 0;
    }
    if (strcmp(a, "spin") == 0 && (argc == 3 || argc == 4)) {
        long secs = num(argv[2]), n = argc == 4 ? num(argv[3]) : 1;
        if (secs < 1 || secs > 600 || n < 1 || n > 64)
            return 64;
        time_t end = time(NULL) + secs;
        for (long i = 1; i < n; i++)
            if (fork() == 0)
                break;
        volatile unsigned long x = 0;
        while (time(NULL) < end)
            for (int i = 0; i < 1000000; i++)
                x += (unsigned long)i;
        (void)x;
        while (wait(NULL) > 0)
            ;
        printf("spun\n");
        return 0;
    }
    fprintf(stderr, "pvagent: unknown action '%s'\n", a);
    return 64;
}
