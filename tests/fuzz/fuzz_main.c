/* fuzz_main.c - a fuzz target without libFuzzer: runs LLVMFuzzerTestOneInput once
 * on each file given, or on each file of each directory given (sorted by name).
 * The plain and ASan builds use it to replay the seeds and every input a fuzzing
 * campaign found (tests/fuzz/regress/), so that those stay fixed under gcc too.
 *
 * As libFuzzer's -timeout and -rss_limit_mb make a hang or a blow-up a finding, an input
 * that runs over $VITLENS_FUZZ_TIMEOUT seconds (default 20: ten times the fuzz build's
 * limit) or takes the process's peak RSS over $VITLENS_FUZZ_RSS_MB (default 1024) fails
 * the run, naming the input.
 *
 * usage: fuzz_<target> FILE_OR_DIR...   exit 0 when every input ran within the limits, 1
 * otherwise or when there was none */
#include "fuzzlib.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static int n_inputs;
static unsigned timeout_s = 20;
static long rss_limit_mb = 1024;
static char current[4200]; /* the input running, for the alarm's message */

static void on_alarm(int sig) {
    (void)sig;
    static const char m[] = "fuzz_main: a hang: over VITLENS_FUZZ_TIMEOUT seconds on input ";
    if (write(2, m, sizeof m - 1) < 0 || write(2, current, strlen(current)) < 0 ||
        write(2, "\n", 1) < 0)
        _exit(1);
    _exit(1);
}

static long env_long(const char *name, long dflt) {
    const char *v = getenv(name);
    return v && atol(v) > 0 ? atol(v) : dflt;
}

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0, k;
    do {
        if (n == cap) {
            cap = cap ? 2 * cap : 65536;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return -1;
            }
            buf = nb;
        }
        n += k = fread(buf + n, 1, cap - n, f);
    } while (k > 0);
    fclose(f);
    /* exactly n bytes, so that ASan sees a read past the input as libFuzzer would */
    uint8_t *in = malloc(n ? n : 1);
    if (!in) {
        free(buf);
        return -1;
    }
    memcpy(in, buf, n);
    free(buf);
    printf("input %s (%zu bytes)\n", path, n);
    fflush(stdout);
    snprintf(current, sizeof current, "%s", path);
    alarm(timeout_s);
    LLVMFuzzerTestOneInput(in, n);
    alarm(0);
    free(in);
    n_inputs++;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0 && ru.ru_maxrss / 1024 > rss_limit_mb) {
        fprintf(stderr,
                "fuzz_main: a blow-up: peak RSS %ld MB, over VITLENS_FUZZ_RSS_MB=%ld, "
                "on input %s\n",
                ru.ru_maxrss / 1024, rss_limit_mb, path);
        return -1;
    }
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        perror(dir);
        return -1;
    }
    char **names = NULL;
    int n = 0, rc = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char **nn = realloc(names, (size_t)(n + 1) * sizeof *nn);
        if (!nn || !(nn[n] = strdup(e->d_name))) {
            names = nn ? nn : names;
            rc = -1;
            break;
        }
        names = nn;
        n++;
    }
    closedir(d);
    if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat sb;
        if (rc == 0 && stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) rc = run_file(path);
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv) {
    timeout_s = (unsigned)env_long("VITLENS_FUZZ_TIMEOUT", 20);
    rss_limit_mb = env_long("VITLENS_FUZZ_RSS_MB", 1024);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            perror(argv[i]);
            return 1;
        }
        if ((S_ISDIR(sb.st_mode) ? run_dir(argv[i]) : run_file(argv[i])) != 0) return 1;
    }
    printf("%s: %d inputs ran\n", argv[0], n_inputs);
    return n_inputs ? 0 : 1;
}
