/*
 * fnr-spawn: the native process spawner of fnr's servers (src/lib/process/native-spawner.ts is the
 * runner's side; docs/process.md "The native spawn helper" says why it exists and how it talks).
 *
 * The runner starts this program with Node's IPC channel (a socketpair inherited at start, its
 * descriptor in NODE_CHANNEL_FD; nothing listens) and speaks the same messages as the Node spawner
 * (spawner-process.ts), in Node's own framing of that channel: one JSON document per line, and a
 * descriptor travels as {"cmd":"NODE_HANDLE","type":"net.Socket","msg":...} with SCM_RIGHTS.
 *
 * Requests (runner -> here) come on this program's stdin, a pipe from the runner, one line each:
 *   {"t":"spawn","id":N,"b":"BASE64"[,"s":BYTES]}  BASE64 decodes to NUL-terminated strings:
 *       cwd ("" for the runner's), command, argc (decimal), argc arguments (argv[0] first), then
 *       the environment's NAME=value strings up to the end. BYTES (at most 1 MiB): the size of
 *       the stdin and stdout pipes, for a large input.
 * What Node writes on the channel is its own acknowledgement of each descriptor received
 * ({"cmd":"NODE_HANDLE_ACK"}, or NACK): three per call, which this program does not need. So it
 * does not wait for the channel to be readable (each acknowledgement would wake it, and on a busy
 * machine take a core from the runner or a function); it reads and drops what is there whenever
 * it is awake anyway, and watches the channel only for its end (the runner gone).
 * Replies (here -> runner):
 *   {"t":"ready"} once at start;
 *   {"t":"spawned","id":N,"pid":P} then {"t":"stdio","id":N,"fd":F} for F = 0, 1, 2, each carrying
 *       the runner's end of a new pipe whose other end is the function's descriptor F (Node takes
 *       a pipe in as it takes a socket: a net.Socket on a Pipe handle);
 *       written back to back, without waiting for Node's acknowledgements;
 *   {"t":"failed","id":N,"code":"EMFILE","message":"..."} when it could not be started;
 *   {"t":"exit","id":N,"code":C,"signal":S,"orphans":K} when it ended (reaped here). K is how many
 *       other children this program had at that moment (-1: unknown), see below.
 *
 * This program is a child subreaper (prctl PR_SET_CHILD_SUBREAPER): a process a function started
 * whose parent exits (a double fork, a setsid daemon once its parent is gone) is re-parented to
 * it, not to PID 1. So when a function has exited, every process it left alive anywhere (in its
 * group or not) is in the tree of a child of this program that is not a function; and when there
 * is no such child ("orphans":0), the function left nothing behind and the runner skips its /proc
 * sweep for the call. Orphans are reaped here when they exit, and killed when the channel closes.
 *
 * Each function leads its own session and process group (setsid), as with Node's `detached`; the
 * runner kills the group by pid on deadline and cancellation. When the channel closes (the runner
 * exited or was killed) every group started here and still running is killed with SIGKILL and
 * this program exits.
 *
 * A function is started by one of a few spawn threads, with clone(CLONE_VM | CLONE_VFORK), as
 * glibc's posix_spawn and Go's os/exec do: the child runs in this program's memory on a stack of
 * its own until its exec, so nothing is copied (a fork copies the page tables, and every page
 * either side then writes: on a machine whose page faults are slow that cost the child and this
 * program 2-3 ms of CPU per function more than the function's own start, docs/process.md). Only
 * the spawn thread is suspended until the child has exec'd; the main thread goes on reading
 * requests, handing over descriptors and reaping, so a child that waits for a core on a busy
 * machine holds up no other call (when this program vforked from its one thread, it sat 75 % of
 * its time suspended beside two busy processes, and the runner's calls stopped at ~250/s). The
 * kernel writes the child's pid into its job at the clone (CLONE_PARENT_SETTID), before the child
 * can run, so a function that exits before its spawn thread resumes is still known when it is
 * reaped. A failed exec leaves its errno in the job (the memory is shared), and the child exits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Functions started and not reaped yet: pid -> request id. */
struct running {
  pid_t pid;
  long long id;
};
static struct running *running;
static size_t running_len, running_cap;

/*
 * A start asked for: made by the main thread (its strings, argument vectors and pipes), started by
 * a spawn thread, and finished by the main thread (descriptors handed over, the pid tracked).
 */
struct job {
  long long id;
  char *payload;  /* the decoded request: every string below points into it */
  char **argv;    /* argc + 1 */
  char **shargv;  /* argc + 2: /bin/sh, the file, argv[1..]: the fallback for a script without #! */
  char **envp;    /* in argv's allocation, after its NULL */
  const char *file;
  const char *cwd;
  int argc;
  int ends[3];       /* the runner's ends: stdin's write end, stdout's and stderr's read ends */
  int child_ends[3]; /* the function's */
  char command[200];
  pid_t pid;  /* written by the kernel at the clone (CLONE_PARENT_SETTID); 0 if there was none */
  int err;    /* the child's errno when its exec failed, or the clone's */
  int reaped; /* main thread only: it was reaped before it was finished */
  int status;
  struct job *next;
};

/* How many functions can be between their clone and their exec at once. */
#define SPAWN_THREADS 4
/* The child's stack until its exec (one per spawn thread: the thread waits while its child runs). */
#define CHILD_STACK_BYTES (256 * 1024)

/* The queue of starts, those being started (by thread) and those started and not yet finished:
   all under `jobs_lock`, held only to move a job. */
static pthread_mutex_t jobs_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t jobs_queued = PTHREAD_COND_INITIALIZER;
static pthread_cond_t jobs_idle = PTHREAD_COND_INITIALIZER;
static struct job *queue_head, *queue_tail, *done_head, *done_tail;
static struct job *starting[SPAWN_THREADS];
static int exiting;

static int channel = -1;
static int wake[2] = {-1, -1};

/* The job started or being started whose child is `pid`, or NULL. Call with jobs_lock held. */
static struct job *job_of(pid_t pid) {
  for (struct job *j = done_head; j; j = j->next)
    if (j->pid == pid) return j;
  for (size_t t = 0; t < SPAWN_THREADS; t++)
    if (starting[t] && __atomic_load_n(&starting[t]->pid, __ATOMIC_ACQUIRE) == pid) return starting[t];
  return NULL;
}

/*
 * The path of the main thread's children list (/proc/PID/task/PID/children). The functions are
 * children of the spawn threads, which list them in their own; what a function leaves behind when
 * it exits is re-parented to this program's first thread, this one, which starts nothing itself:
 * everything in its list is such an orphan.
 */
static char children_path[64];

/*
 * Calls fn(pid) for each orphan re-parented here (alive, or a zombie not reaped yet). Returns how
 * many, or -1 when the list cannot be read (a kernel without CONFIG_PROC_CHILDREN, /proc not
 * mounted).
 */
static long for_each_orphan(void (*fn)(pid_t)) {
  int fd = open(children_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[4096];
  long count = 0;
  pid_t pid = 0;
  int in_number = 0;
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
      return -1;
    }
    for (ssize_t i = 0; i <= n; i++) {
      /* the list is "PID PID ... " with a trailing space; n == 0 ends the last number */
      if (i < n && buf[i] >= '0' && buf[i] <= '9') {
        pid = pid * 10 + (buf[i] - '0');
        in_number = 1;
      } else if (in_number && (i < n || n == 0)) {
        count++;
        if (fn) fn(pid);
        pid = 0;
        in_number = 0;
      }
    }
    if (n == 0) break;
  }
  close(fd);
  return count;
}

static void kill_orphan(pid_t pid) {
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
}

static void kill_all_and_exit(int code) {
  /* No start begins now; those between their clone and their exec are killed and awaited, so
     every function started is in a table below. */
  pthread_mutex_lock(&jobs_lock);
  exiting = 1;
  for (;;) {
    int busy = 0;
    for (size_t t = 0; t < SPAWN_THREADS; t++) {
      if (!starting[t]) continue;
      busy = 1;
      pid_t pid = __atomic_load_n(&starting[t]->pid, __ATOMIC_ACQUIRE);
      if (pid > 0) kill(pid, SIGKILL);
    }
    if (!busy) break;
    pthread_cond_wait(&jobs_idle, &jobs_lock);
  }
  /* Started and not yet handed over; a child not yet in a session of its own is killed by its pid. */
  for (struct job *j = done_head; j; j = j->next) {
    if (j->pid <= 0) continue;
    kill(-j->pid, SIGKILL);
    kill(j->pid, SIGKILL);
  }
  pthread_mutex_unlock(&jobs_lock);
  for (size_t i = 0; i < running_len; i++) kill(-running[i].pid, SIGKILL);
  /* What the functions left behind and was re-parented here dies with them. */
  for_each_orphan(kill_orphan);
  _exit(code);
}

static void on_sigchld(int sig) {
  (void)sig;
  int saved = errno;
  char b = 0;
  ssize_t r = write(wake[1], &b, 1);
  (void)r;
  errno = saved;
}

/* Writes a whole message, with an optional descriptor attached to its first byte. */
static int send_message(const char *data, size_t len, int fd) {
  size_t off = 0;
  while (off < len) {
    struct iovec iov = {.iov_base = (char *)data + off, .iov_len = len - off};
    union {
      struct cmsghdr h;
      char space[CMSG_SPACE(sizeof(int))];
    } control;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0 && off == 0) {
      memset(&control, 0, sizeof control);
      msg.msg_control = control.space;
      msg.msg_controllen = sizeof control.space;
      struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    ssize_t n = sendmsg(channel, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    off += (size_t)n;
  }
  return 0;
}

/* Reads and drops what Node wrote on the channel (its acknowledgements); its end ends this program. */
static void drain_channel(void) {
  char sink[4096];
  for (;;) {
    ssize_t n = recv(channel, sink, sizeof sink, MSG_DONTWAIT);
    if (n > 0) continue;
    if (n == 0) kill_all_and_exit(0);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    kill_all_and_exit(0);
  }
}

/* A reply without a descriptor; the runner being gone ends this program. */
static void reply(const char *data, size_t len) {
  int err = send_message(data, len, -1);
  if (err == -EPIPE || err == -ECONNRESET || err == -EBADF) kill_all_and_exit(0);
}

static const char *errno_name(int e) {
  switch (e) {
    case ENOENT: return "ENOENT";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case EMFILE: return "EMFILE";
    case ENFILE: return "ENFILE";
    case EAGAIN: return "EAGAIN";
    case ENOMEM: return "ENOMEM";
    case ENOTDIR: return "ENOTDIR";
    case ENOEXEC: return "ENOEXEC";
    case E2BIG: return "E2BIG";
    case ELOOP: return "ELOOP";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case ETXTBSY: return "ETXTBSY";
    case EISDIR: return "EISDIR";
    case EINVAL: return "EINVAL";
    case EIO: return "EIO";
    case ETOOMANYREFS: return "ETOOMANYREFS";
    default: return "UNKNOWN";
  }
}

static const char *signal_name(int s) {
  static const char *names[] = {
      [SIGHUP] = "SIGHUP",   [SIGINT] = "SIGINT",       [SIGQUIT] = "SIGQUIT", [SIGILL] = "SIGILL",       [SIGTRAP] = "SIGTRAP",
      [SIGABRT] = "SIGABRT", [SIGBUS] = "SIGBUS",       [SIGFPE] = "SIGFPE",   [SIGKILL] = "SIGKILL",     [SIGUSR1] = "SIGUSR1",
      [SIGSEGV] = "SIGSEGV", [SIGUSR2] = "SIGUSR2",     [SIGPIPE] = "SIGPIPE", [SIGALRM] = "SIGALRM",     [SIGTERM] = "SIGTERM",
      [SIGCHLD] = "SIGCHLD", [SIGCONT] = "SIGCONT",     [SIGSTOP] = "SIGSTOP", [SIGTSTP] = "SIGTSTP",     [SIGTTIN] = "SIGTTIN",
      [SIGTTOU] = "SIGTTOU", [SIGURG] = "SIGURG",       [SIGXCPU] = "SIGXCPU", [SIGXFSZ] = "SIGXFSZ",     [SIGVTALRM] = "SIGVTALRM",
      [SIGPROF] = "SIGPROF", [SIGWINCH] = "SIGWINCH",   [SIGIO] = "SIGIO",     [SIGSYS] = "SIGSYS",
  };
  if (s > 0 && (size_t)s < sizeof names / sizeof names[0] && names[s]) return names[s];
  return NULL;
}

static void reply_failed(long long id, const char *command, int e) {
  char line[512];
  /* Node's wording ("spawn CMD CODE"); the command is cut short and stripped of what JSON escapes. */
  char cmd[200];
  size_t j = 0;
  for (size_t i = 0; command[i] && j < sizeof cmd - 1; i++) {
    unsigned char c = (unsigned char)command[i];
    cmd[j++] = (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) ? '?' : (char)c;
  }
  cmd[j] = 0;
  /* ETOOMANYREFS: descriptors in flight to the runner count against this process's limit. */
  const char *code = errno_name(e == ETOOMANYREFS ? EMFILE : e);
  int n = snprintf(line, sizeof line, "{\"t\":\"failed\",\"id\":%lld,\"code\":\"%s\",\"message\":\"spawn %s %s\"}\n", id, code, cmd, code);
  reply(line, (size_t)n);
}

static void track(pid_t pid, long long id) {
  if (running_len == running_cap) {
    size_t cap = running_cap ? running_cap * 2 : 64;
    struct running *r = realloc(running, cap * sizeof *r);
    if (!r) kill_all_and_exit(70);
    running = r;
    running_cap = cap;
  }
  running[running_len].pid = pid;
  running[running_len].id = id;
  running_len++;
}

/* Functions reaped in one pass, reported together once the orphans are counted. */
struct ended {
  long long id;
  int status;
};

static void report_exit(long long id, int st, long orphans) {
  char line[192];
  int n;
  if (WIFSIGNALED(st)) {
    const char *name = signal_name(WTERMSIG(st));
    if (name) n = snprintf(line, sizeof line, "{\"t\":\"exit\",\"id\":%lld,\"code\":null,\"signal\":\"%s\",\"orphans\":%ld}\n", id, name, orphans);
    else n = snprintf(line, sizeof line, "{\"t\":\"exit\",\"id\":%lld,\"code\":null,\"signal\":null,\"orphans\":%ld}\n", id, orphans);
  } else {
    n = snprintf(line, sizeof line, "{\"t\":\"exit\",\"id\":%lld,\"code\":%d,\"signal\":null,\"orphans\":%ld}\n", id, WEXITSTATUS(st), orphans);
  }
  reply(line, (size_t)n);
}

static void reap(void) {
  struct ended ended[64];
  size_t count = 0;
  for (;;) {
    int status;
    pid_t pid = 0;
    if (count < sizeof ended / sizeof ended[0]) pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      /* An orphan re-parented here is reaped and otherwise ignored. */
      int found = 0;
      for (size_t i = 0; i < running_len; i++) {
        if (running[i].pid != pid) continue;
        ended[count].id = running[i].id;
        ended[count].status = status;
        count++;
        running[i] = running[--running_len];
        found = 1;
        break;
      }
      /* A function that ended before it was handed over: reported once it is (finish()). */
      if (!found) {
        pthread_mutex_lock(&jobs_lock);
        struct job *j = job_of(pid);
        if (j) {
          j->reaped = 1;
          j->status = status;
        }
        pthread_mutex_unlock(&jobs_lock);
      }
      continue;
    }
    if (count == 0) return;
    /* Counted after the reaping: a function's children are re-parented here before it can be
       reaped, so a count of 0 means none of the functions reaped left a process alive. */
    long orphans = for_each_orphan(NULL);
    for (size_t k = 0; k < count; k++) report_exit(ended[k].id, ended[k].status, orphans);
    count = 0;
  }
}

static int b64value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

/* Decodes base64 (padding optional) into out; returns the length, or -1. */
static long b64decode(const char *in, size_t len, char *out) {
  uint32_t acc = 0;
  int bits = 0;
  long n = 0;
  for (size_t i = 0; i < len; i++) {
    if (in[i] == '=') break;
    int v = b64value((unsigned char)in[i]);
    if (v < 0) return -1;
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[n++] = (char)((acc >> bits) & 0xff);
    }
  }
  return n;
}

/*
 * The signals this program ignores: the child sets them back to their default action before its
 * exec (a handled signal is set back by the exec itself, an ignored one would stay ignored), so a
 * function starts with every signal at its default action.
 */
static sigset_t default_signals;

/* In the child: execve, and for ENOEXEC (a script without a #! line) /bin/sh with the file, as
   execvp (and so Node) runs it. Returns only on failure, with the errno. */
static int exec_file(struct job *j, const char *file) {
  execve(file, j->argv, j->envp);
  if (errno != ENOEXEC) return errno;
  j->shargv[1] = (char *)file;
  execve("/bin/sh", j->shargv, j->envp);
  return errno;
}

/*
 * In the child, between its clone and its exec, in this program's memory (on its own stack, with
 * its spawn thread suspended; it allocates nothing and writes only its job): its own session,
 * every signal at its default action and none blocked, its ends as descriptors 0-2 (dup2 clears
 * their close-on-exec flag; every other descriptor of this program is close-on-exec), the working
 * directory, then the exec with the function's PATH searched as execvp does. Returns only on
 * failure, with the errno.
 */
static int child_exec(struct job *j) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < 32; s++)
    if (sigismember(&default_signals, s)) sigaction(s, &dfl, NULL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  if (setsid() < 0) return errno;
  for (int i = 0; i < 3; i++)
    if (dup2(j->child_ends[i], i) < 0) return errno;
  if (j->cwd[0] && chdir(j->cwd) != 0) return errno;
  const char *file = j->file;
  if (strchr(file, '/')) return exec_file(j, file);
  const char *search = "/usr/local/bin:/usr/bin:/bin";
  for (char *const *e = j->envp; *e; e++)
    if (strncmp(*e, "PATH=", 5) == 0) search = *e + 5;
  int denied = 0, err = ENOENT;
  size_t flen = strlen(file);
  /* Longer than this is longer than execve takes (PATH_MAX): ENAMETOOLONG, as execve says. */
  char candidate[8192];
  for (const char *p = search;;) {
    const char *end = strchr(p, ':');
    size_t dlen = end ? (size_t)(end - p) : strlen(p);
    if (dlen + flen + 2 > sizeof candidate) {
      err = ENAMETOOLONG;
    } else {
      /* An empty entry is the working directory. */
      size_t at = 0;
      if (dlen) {
        memcpy(candidate, p, dlen);
        candidate[dlen] = '/';
        at = dlen + 1;
      }
      memcpy(candidate + at, file, flen + 1);
      err = exec_file(j, candidate);
    }
    if (err == EACCES) denied = 1;
    else if (err != ENOENT && err != ENOTDIR) return err;
    if (!end) return denied ? EACCES : err;
    p = end + 1;
  }
}

/* The child's start: it never returns (its exec replaces it, or it exits with the errno in its job). */
static int child_main(void *arg) {
  struct job *j = arg;
  int err = child_exec(j);
  j->err = err ? err : EINVAL;
  _exit(127);
}

/* A spawn thread: starts queued jobs, one at a time, suspended from each clone to its child's exec. */
static void *spawn_thread(void *arg) {
  size_t slot = (size_t)arg;
  char *stack = mmap(NULL, CHILD_STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  for (;;) {
    pthread_mutex_lock(&jobs_lock);
    while (!queue_head || exiting) pthread_cond_wait(&jobs_queued, &jobs_lock);
    struct job *j = queue_head;
    queue_head = j->next;
    if (!queue_head) queue_tail = NULL;
    j->next = NULL;
    starting[slot] = j;
    pthread_mutex_unlock(&jobs_lock);
    if (stack == MAP_FAILED) {
      j->err = ENOMEM;
    } else {
      /* The stack grows down: the child starts at its top. SIGCHLD: reaped as any child. */
      pid_t pid = clone(child_main, stack + CHILD_STACK_BYTES, CLONE_VM | CLONE_VFORK | CLONE_PARENT_SETTID | SIGCHLD, j, &j->pid);
      if (pid < 0) {
        j->err = errno;
        __atomic_store_n(&j->pid, 0, __ATOMIC_RELEASE);
      }
    }
    pthread_mutex_lock(&jobs_lock);
    starting[slot] = NULL;
    if (done_tail) done_tail->next = j;
    else done_head = j;
    done_tail = j;
    if (exiting) pthread_cond_broadcast(&jobs_idle);
    pthread_mutex_unlock(&jobs_lock);
    char b = 0;
    ssize_t r = write(wake[1], &b, 1);
    (void)r;
  }
  return NULL;
}

static void set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

static void close_ends(const int ends[3]) {
  for (int i = 0; i < 3; i++) close(ends[i]);
}

static void free_job(struct job *j) {
  free(j->argv); /* envp too: it is the vector's second part */
  free(j->shargv);
  free(j->payload);
  free(j);
}

/*
 * A start is over (its child exec'd, or failed to): hands the runner its ends, and its exit if it
 * was reaped already; or says it failed.
 */
static void finish(struct job *j) {
  for (int k = 0; k < 3; k++) close(j->child_ends[k]);
  if (j->err) {
    /* A child whose exec failed has exited; it is reaped as any child that is not a function. */
    close_ends(j->ends);
    reply_failed(j->id, j->command, j->err);
    free_job(j);
    return;
  }
  /* Tracked before anything is sent: a runner gone meanwhile (EPIPE below) ends this program, which
     kills what its tables hold, and the function is no longer a job. */
  if (!j->reaped) track(j->pid, j->id);
  /* The runner's ends: reading and writing them must not block its event loop. */
  for (int k = 0; k < 3; k++) set_nonblocking(j->ends[k]);
  char line[256];
  int m0 = snprintf(line, sizeof line, "{\"t\":\"spawned\",\"id\":%lld,\"pid\":%d}\n", j->id, (int)j->pid);
  /* `spawned` goes in the same write as stdin's descriptor; each descriptor in a write of its own,
     because Node takes in one per read of its channel. */
  for (int fd = 0; fd < 3; fd++) {
    int off = fd == 0 ? m0 : 0;
    int m = snprintf(line + off, sizeof line - (size_t)off, "{\"cmd\":\"NODE_HANDLE\",\"type\":\"net.Socket\",\"msg\":{\"t\":\"stdio\",\"id\":%lld,\"fd\":%d}}\n", j->id, fd);
    int e = send_message(line, (size_t)(m + off), j->ends[fd]);
    if (e == -EPIPE || e == -ECONNRESET || e == -EBADF) kill_all_and_exit(0);
    if (e != 0) {
      /* The descriptors could not be handed over (ETOOMANYREFS: too many in flight): the call fails. */
      kill(-j->pid, SIGKILL);
      close_ends(j->ends);
      reply_failed(j->id, j->command, -e);
      free_job(j);
      return;
    }
  }
  close_ends(j->ends);
  if (j->reaped) report_exit(j->id, j->status, for_each_orphan(NULL));
  free_job(j);
}

/* Finishes the starts the spawn threads are done with, one at a time (those left stay where
   kill_all_and_exit finds them). */
static void finish_started(void) {
  for (;;) {
    pthread_mutex_lock(&jobs_lock);
    struct job *j = done_head;
    if (j) {
      done_head = j->next;
      if (!done_head) done_tail = NULL;
    }
    pthread_mutex_unlock(&jobs_lock);
    if (!j) return;
    finish(j);
  }
}

/* A start asked for: `payload` (the decoded request, handed over here) made into a job and queued. */
static void handle_spawn(long long id, char *payload, long len, int pipe_size) {
  /* The payload's strings, each ending in a NUL: cwd, file, argc, the arguments, the environment. */
  size_t count = 0;
  for (long i = 0; i < len; i++)
    if (payload[i] == 0) count++;
  if (len == 0 || payload[len - 1] != 0 || count < 3) {
    reply_failed(id, "?", EINVAL);
    free(payload);
    return;
  }
  struct job *j = calloc(1, sizeof *j);
  if (!j) {
    reply_failed(id, "?", ENOMEM);
    free(payload);
    return;
  }
  j->id = id;
  j->payload = payload;
  char *p = payload;
  j->cwd = p;
  p += strlen(p) + 1;
  j->file = p;
  p += strlen(p) + 1;
  snprintf(j->command, sizeof j->command, "%s", j->file);
  long argc = strtol(p, NULL, 10);
  p += strlen(p) + 1;
  if (argc < 1 || (size_t)argc > count - 3) {
    reply_failed(id, j->command, EINVAL);
    free_job(j);
    return;
  }
  j->argc = (int)argc;
  /* One vector for both: the arguments and a NULL, then the environment and a NULL. */
  j->argv = malloc((count - 1) * sizeof *j->argv);
  j->shargv = malloc(((size_t)argc + 2) * sizeof *j->shargv);
  if (!j->argv || !j->shargv) {
    reply_failed(id, j->command, ENOMEM);
    free_job(j);
    return;
  }
  char **v = j->argv;
  for (long i = 0; i < argc; i++, p += strlen(p) + 1) *v++ = p;
  *v++ = NULL;
  j->envp = v;
  for (; p < payload + len; p += strlen(p) + 1) *v++ = p;
  *v = NULL;
  j->shargv[0] = "/bin/sh";
  j->shargv[1] = (char *)j->file;
  for (long i = 1; i < argc; i++) j->shargv[i + 1] = j->argv[i];
  j->shargv[argc + 1] = NULL;

  /* The function's stdio are pipes, as Go's os/exec (Porch's runner, kpt) gives it: a socket
     would do for read() and write(), but not for open("/dev/stdin"), `> /dev/stderr` or
     `[ -p /dev/stdin ]` (ENXIO, false), which scripts use. */
  int made = 0, err = 0;
  for (; made < 3; made++) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
      err = errno;
      break;
    }
    /* A large input's stdin and stdout hold more (best effort: the kernel refuses a user over
       its pipe-user-pages-soft, and the default then stays). */
    if (pipe_size > 0 && made < 2) fcntl(p[0], F_SETPIPE_SZ, pipe_size);
    j->ends[made] = made == 0 ? p[1] : p[0];
    j->child_ends[made] = made == 0 ? p[0] : p[1];
  }
  if (err) {
    for (int i = 0; i < made; i++) {
      close(j->ends[i]);
      close(j->child_ends[i]);
    }
    reply_failed(id, j->command, err);
    free_job(j);
    return;
  }
  pthread_mutex_lock(&jobs_lock);
  if (queue_tail) queue_tail->next = j;
  else queue_head = j;
  queue_tail = j;
  pthread_cond_signal(&jobs_queued);
  pthread_mutex_unlock(&jobs_lock);
}

/* One line from the runner. */
static void handle_line(char *line, size_t len) {
  line[len] = 0;
  if (!strstr(line, "\"t\":\"spawn\"")) return;
  char *idp = strstr(line, "\"id\":");
  char *bp = strstr(line, "\"b\":\"");
  if (!idp || !bp) return;
  long long id = strtoll(idp + 5, NULL, 10);
  bp += 5;
  char *end = strchr(bp, '"');
  if (!end) return;
  size_t blen = (size_t)(end - bp);
  /* "s": the pipe size asked for a large input (after "b", whose base64 has no quote). */
  char *sp = strstr(end, "\"s\":");
  long pipe_size = sp ? strtol(sp + 4, NULL, 10) : 0;
  if (pipe_size < 0 || pipe_size > (1L << 20)) pipe_size = 0;
  char *payload = malloc(blen / 4 * 3 + 4);
  if (!payload) {
    reply_failed(id, "?", ENOMEM);
    return;
  }
  long plen = b64decode(bp, blen, payload);
  if (plen < 0) {
    reply_failed(id, "?", EINVAL);
    free(payload);
    return;
  }
  handle_spawn(id, payload, plen, (int)pipe_size);
}

int main(void) {
  const char *fdvar = getenv("NODE_CHANNEL_FD");
  if (!fdvar) {
    fprintf(stderr, "fnr-spawn: started without its IPC channel; it is started by fnr serve and the wrapper server\n");
    return 2;
  }
  channel = atoi(fdvar);
  /* Orphans of the functions come here rather than to PID 1 (see the top of this file). */
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) children_path[0] = 0;
  else snprintf(children_path, sizeof children_path, "/proc/%d/task/%d/children", (int)getpid(), (int)getpid());
  /* Descriptors 0-2 open (on /dev/null if not): a pipe made later must never land on them,
     where dup2 onto the function's own 0-2 would not clear its close-on-exec flag. */
  for (int fd = 0; fd < 3; fd++) {
    if (fd != channel && fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd) return 71;
  }
  int flags = fcntl(channel, F_GETFL);
  if (flags < 0 || fcntl(channel, F_SETFD, FD_CLOEXEC) != 0) {
    fprintf(stderr, "fnr-spawn: NODE_CHANNEL_FD %s is not an open descriptor\n", fdvar);
    return 2;
  }
  fcntl(channel, F_SETFL, flags & ~O_NONBLOCK);
  /* The channel is read without blocking (poll says when); writes block until the runner reads. */
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) return 71;

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigchld;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, NULL);
  /* Signals meant for the runner's process group (a terminal's ^C, a supervisor's TERM) are the
     runner's to handle: it drains its calls, which need this process until they end. */
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  /* And nothing else ends it by a stray signal (SIGUSR1 asks a Node process for its debugger). */
  signal(SIGUSR1, SIG_IGN);
  signal(SIGUSR2, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  /* Whatever is ignored now (these, and any the runner left ignored) is what a child sets back. */
  sigemptyset(&default_signals);
  for (int s = 1; s < 32; s++) {
    struct sigaction now;
    if (s != SIGKILL && s != SIGSTOP && sigaction(s, NULL, &now) == 0 && now.sa_handler == SIG_IGN) sigaddset(&default_signals, s);
  }
  /* The spawn threads block every signal (SIGCHLD is the main thread's; a child starts with them
     blocked and sets its own mask), with small stacks of their own. */
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, NULL);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  for (size_t t = 0; t < SPAWN_THREADS; t++) {
    pthread_t thread;
    if (pthread_create(&thread, &attr, spawn_thread, (void *)t) != 0) {
      fprintf(stderr, "fnr-spawn: cannot start its spawn threads\n");
      return 71;
    }
  }
  pthread_attr_destroy(&attr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);

  const char ready[] = "{\"t\":\"ready\"}\n";
  reply(ready, sizeof ready - 1);

  size_t cap = 65536, have = 0;
  char *buf = malloc(cap);
  if (!buf) return 71;
  /* Requests come on stdin, without blocking (poll says when). */
  fcntl(0, F_SETFD, FD_CLOEXEC);
  int in_flags = fcntl(0, F_GETFL);
  if (in_flags < 0 || fcntl(0, F_SETFL, in_flags | O_NONBLOCK) != 0) {
    fprintf(stderr, "fnr-spawn: no request pipe on stdin\n");
    return 2;
  }
  for (;;) {
    /* Node's acknowledgements: read and dropped, without waiting for them. */
    drain_channel();
    /* Requests, the pipe that SIGCHLD and the spawn threads write to, and the channel's end only. */
    struct pollfd polls[3] = {{.fd = 0, .events = POLLIN}, {.fd = wake[0], .events = POLLIN}, {.fd = channel, .events = 0}};
    if (poll(polls, 3, -1) < 0) {
      if (errno == EINTR) continue;
      kill_all_and_exit(71);
    }
    if (polls[2].revents & (POLLHUP | POLLERR)) kill_all_and_exit(0);
    if (polls[1].revents) {
      char drain[64];
      while (read(wake[0], drain, sizeof drain) > 0) {
      }
      reap();
      finish_started();
    }
    if (!polls[0].revents) continue;
    if (have + 1 >= cap) {
      /* A request longer than the buffer: grow it (an environment can be large). */
      if (cap >= (size_t)256 << 20) kill_all_and_exit(70);
      char *b = realloc(buf, cap * 2);
      if (!b) kill_all_and_exit(70);
      buf = b;
      cap *= 2;
    }
    ssize_t n = read(0, buf + have, cap - have - 1);
    if (n == 0) kill_all_and_exit(0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      kill_all_and_exit(0);
    }
    have += (size_t)n;
    size_t start = 0;
    for (size_t i = start; i < have; i++) {
      if (buf[i] != '\n') continue;
      handle_line(buf + start, i - start);
      start = i + 1;
    }
    memmove(buf, buf + start, have - start);
    have -= start;
    reap();
  }
}
