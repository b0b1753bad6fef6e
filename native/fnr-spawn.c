/*
 * fnr-spawn: the native process spawner of fnr's servers (src/lib/process/native-spawner.ts is the
 * runner's side; docs/process.md "The native spawn helper" says why it exists and how it talks).
 *
 * The runner starts this program with Node's IPC channel (a socketpair inherited at start, its
 * descriptor in NODE_CHANNEL_FD; nothing listens) and speaks the same messages as the Node spawner
 * (spawner-process.ts), in Node's own framing of that channel: one JSON document per line, and a
 * descriptor travels as {"cmd":"NODE_HANDLE","type":"net.Socket","msg":...} with SCM_RIGHTS.
 *
 * Requests (runner -> here), one line each:
 *   {"t":"spawn","id":N,"b":"BASE64"[,"s":BYTES]}  BASE64 decodes to NUL-terminated strings:
 *       cwd ("" for the runner's), command, argc (decimal), argc arguments (argv[0] first), then
 *       the environment's NAME=value strings up to the end. BYTES (at most 1 MiB): the size of
 *       the stdin and stdout pipes, for a large input.
 *   Node's own {"cmd":"NODE_HANDLE_ACK"} and NACK lines are read and dropped.
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
 * A function is started with fork(), and its exec is confirmed without waiting for it: the child
 * writes a failed exec's errno to a close-on-exec pipe, whose end-of-file says the exec succeeded,
 * and this program serves other requests meanwhile. posix_spawn (glibc: clone(CLONE_VM |
 * CLONE_VFORK)) suspends its caller until the child has exec'd, and on a busy machine the child
 * first waits for a core: starting every function of its runner that way, one after another, this
 * program spent 75 % of its time suspended in the clone, and the runner's calls stopped at ~250/s
 * beside two busy processes (docs/process.md). Go's os/exec in Porch's runner vforks too, but from
 * whichever of its threads the call runs on. The fork copies the page tables of a process of a few
 * hundred KiB: ~20 us more than posix_spawn.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
 * Functions forked whose exec is not confirmed yet: the read end of each one's error pipe, the
 * runner's ends of its stdio pipes (handed over once the exec is confirmed), and its exit
 * status if it was reaped before that.
 */
struct pending {
  pid_t pid;
  long long id;
  int err_fd;
  int ends[3];
  int reaped;
  int status;
  char command[200];
};
static struct pending *pending;
static size_t pending_len, pending_cap;

static int channel = -1;
static int wake[2] = {-1, -1};

static int is_running(pid_t pid) {
  for (size_t i = 0; i < running_len; i++)
    if (running[i].pid == pid) return 1;
  for (size_t i = 0; i < pending_len; i++)
    if (pending[i].pid == pid) return 1;
  return 0;
}

/* The path of this program's children list (/proc/PID/task/PID/children: it has one thread). */
static char children_path[64];

/*
 * Calls fn(pid) for each child of this program that is not a running function (an orphan
 * re-parented here, or a function's zombie not reaped yet). Returns how many, or -1 when the list
 * cannot be read (a kernel without CONFIG_PROC_CHILDREN, /proc not mounted).
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
        if (!is_running(pid)) {
          count++;
          if (fn) fn(pid);
        }
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
  for (size_t i = 0; i < running_len; i++) kill(-running[i].pid, SIGKILL);
  /* A child not yet in a session of its own is killed by its pid. */
  for (size_t i = 0; i < pending_len; i++) {
    kill(-pending[i].pid, SIGKILL);
    kill(pending[i].pid, SIGKILL);
  }
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

/* Room for one more pending start; NULL when memory is out (the table is unchanged). */
static struct pending *grow_pending(void) {
  size_t cap = pending_cap ? pending_cap * 2 : 64;
  struct pending *p = realloc(pending, cap * sizeof *p);
  if (!p) return NULL;
  pending_cap = cap;
  return p;
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
      /* A function that ended before its exec was confirmed: reported once it is (confirm()). */
      for (size_t i = 0; !found && i < pending_len; i++) {
        if (pending[i].pid != pid) continue;
        pending[i].reaped = 1;
        pending[i].status = status;
        break;
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

/* In the child: reports `err` to the parent on the error pipe and exits. */
static void child_fail(int err_fd, int err) {
  ssize_t r = write(err_fd, &err, sizeof err);
  (void)r;
  _exit(127);
}

/* In the child: execve, and for ENOEXEC (a script without a #! line) /bin/sh with the file, as
   execvp (and so Node) runs it. Returns only on failure, with errno set. */
static void exec_file(const char *file, char **argv, int argc, char *const envp[]) {
  execve(file, argv, envp);
  if (errno != ENOEXEC) return;
  char **shargv = calloc((size_t)argc + 2, sizeof *shargv);
  if (!shargv) {
    errno = ENOMEM;
    return;
  }
  shargv[0] = "/bin/sh";
  shargv[1] = (char *)file;
  for (int i = 1; i < argc; i++) shargv[i + 1] = argv[i];
  execve("/bin/sh", shargv, envp);
}

/*
 * In the child, after fork: its own session, every signal at its default action and none blocked,
 * its ends as descriptors 0-2 (dup2 clears their close-on-exec flag; every other descriptor of this
 * program is close-on-exec), the working directory, then the exec with the function's PATH
 * searched as execvp does. Never returns: a failure's errno goes to the error pipe.
 */
static void child_exec(const char *file, char **argv, int argc, char *const envp[], const char *cwd, const int fds[3], int err_fd) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < 32; s++)
    if (sigismember(&default_signals, s)) sigaction(s, &dfl, NULL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  if (setsid() < 0) child_fail(err_fd, errno);
  for (int i = 0; i < 3; i++)
    if (dup2(fds[i], i) < 0) child_fail(err_fd, errno);
  if (cwd && cwd[0] && chdir(cwd) != 0) child_fail(err_fd, errno);
  if (strchr(file, '/')) {
    exec_file(file, argv, argc, envp);
    child_fail(err_fd, errno);
  }
  const char *search = "/usr/local/bin:/usr/bin:/bin";
  for (char *const *e = envp; *e; e++)
    if (strncmp(*e, "PATH=", 5) == 0) search = *e + 5;
  int denied = 0;
  size_t flen = strlen(file);
  for (const char *p = search;;) {
    const char *end = strchr(p, ':');
    size_t dlen = end ? (size_t)(end - p) : strlen(p);
    char *candidate = malloc(dlen + flen + 2);
    if (!candidate) child_fail(err_fd, ENOMEM);
    if (dlen == 0) snprintf(candidate, flen + 1, "%s", file);
    else snprintf(candidate, dlen + flen + 2, "%.*s/%s", (int)dlen, p, file);
    exec_file(candidate, argv, argc, envp);
    int err = errno;
    free(candidate);
    if (err == EACCES) denied = 1;
    else if (err != ENOENT && err != ENOTDIR) child_fail(err_fd, err);
    if (!end) child_fail(err_fd, denied ? EACCES : err);
    p = end + 1;
  }
}

static void set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

static void close_ends(const int ends[3]) {
  for (int i = 0; i < 3; i++) close(ends[i]);
}

/*
 * The exec of pending[i] is confirmed (its error pipe ended empty): hands the runner its ends, and
 * its exit if it was reaped already. Or the exec failed (the pipe brought its errno): `failed`.
 */
static void confirm(size_t i) {
  struct pending p = pending[i];
  int err = 0;
  ssize_t n;
  do n = read(p.err_fd, &err, sizeof err);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
  close(p.err_fd);
  pending[i] = pending[--pending_len];
  if (n == (ssize_t)sizeof err) {
    /* The child exits at once; it is reaped as any child that is not a function. */
    close_ends(p.ends);
    reply_failed(p.id, p.command, err);
    return;
  }
  /* Tracked before anything is sent: a runner gone meanwhile (EPIPE below) ends this program, which
     kills what its tables hold, and the function is no longer in the pending one. */
  if (!p.reaped) track(p.pid, p.id);
  /* The runner's ends: reading and writing them must not block its event loop. */
  for (int k = 0; k < 3; k++) set_nonblocking(p.ends[k]);
  char line[256];
  int m0 = snprintf(line, sizeof line, "{\"t\":\"spawned\",\"id\":%lld,\"pid\":%d}\n", p.id, (int)p.pid);
  /* `spawned` goes in the same write as stdin's descriptor; each descriptor in a write of its own,
     because Node takes in one per read of its channel. */
  for (int fd = 0; fd < 3; fd++) {
    int off = fd == 0 ? m0 : 0;
    int m = snprintf(line + off, sizeof line - (size_t)off, "{\"cmd\":\"NODE_HANDLE\",\"type\":\"net.Socket\",\"msg\":{\"t\":\"stdio\",\"id\":%lld,\"fd\":%d}}\n", p.id, fd);
    int e = send_message(line, (size_t)(m + off), p.ends[fd]);
    if (e == -EPIPE || e == -ECONNRESET || e == -EBADF) kill_all_and_exit(0);
    if (e != 0) {
      /* The descriptors could not be handed over (ETOOMANYREFS: too many in flight): the call fails. */
      kill(-p.pid, SIGKILL);
      close_ends(p.ends);
      reply_failed(p.id, p.command, -e);
      return;
    }
  }
  close_ends(p.ends);
  if (p.reaped) report_exit(p.id, p.status, for_each_orphan(NULL));
}

static void handle_spawn(long long id, char *payload, long len, int pipe_size) {
  /* Split the payload at NULs. */
  size_t count = 0;
  for (long i = 0; i < len; i++)
    if (payload[i] == 0) count++;
  if (len == 0 || payload[len - 1] != 0 || count < 3) {
    reply_failed(id, "?", EINVAL);
    return;
  }
  char **parts = malloc((count + 1) * sizeof *parts);
  if (!parts) {
    reply_failed(id, "?", ENOMEM);
    return;
  }
  size_t k = 0;
  for (long i = 0; i < len; i += (long)strlen(payload + i) + 1) parts[k++] = payload + i;
  parts[k] = NULL;
  const char *cwd = parts[0];
  long argc = strtol(parts[2], NULL, 10);
  if (argc < 1 || (size_t)argc > count - 3) {
    reply_failed(id, parts[1], EINVAL);
    free(parts);
    return;
  }
  char **argv = malloc(((size_t)argc + 1) * sizeof *argv);
  if (argv && pending_len == pending_cap) {
    struct pending *grown = grow_pending();
    if (grown) pending = grown;
  }
  if (!argv || pending_len == pending_cap) {
    reply_failed(id, parts[1], ENOMEM);
    free(argv);
    free(parts);
    return;
  }
  for (long i = 0; i < argc; i++) argv[i] = parts[3 + i];
  argv[argc] = NULL;
  char **envp = parts + 3 + argc;

  /* The function's stdio are pipes, as Go's os/exec (Porch's runner, kpt) gives it: a socket
     would do for read() and write(), but not for open("/dev/stdin"), `> /dev/stderr` or
     `[ -p /dev/stdin ]` (ENXIO, false), which scripts use. ends[i]: the runner's end of pipe i
     (stdin's write end, stdout's and stderr's read ends); child_ends[i]: the function's. */
  int ends[3] = {-1, -1, -1}, child_ends[3] = {-1, -1, -1};
  int errpipe[2] = {-1, -1};
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
    ends[made] = made == 0 ? p[1] : p[0];
    child_ends[made] = made == 0 ? p[0] : p[1];
  }
  if (!err && pipe2(errpipe, O_CLOEXEC) != 0) err = errno;
  pid_t pid = -1;
  if (!err) {
    pid = fork();
    if (pid == 0) child_exec(parts[1], argv, (int)argc, envp, cwd, child_ends, errpipe[1]);
    if (pid < 0) err = errno;
  }
  for (int i = 0; i < made; i++) close(child_ends[i]);
  if (errpipe[1] >= 0) close(errpipe[1]);
  if (err) {
    for (int i = 0; i < made; i++) close(ends[i]);
    if (errpipe[0] >= 0) close(errpipe[0]);
    reply_failed(id, parts[1], err);
    free(argv);
    free(parts);
    return;
  }
  set_nonblocking(errpipe[0]);
  struct pending *p = &pending[pending_len++];
  memset(p, 0, sizeof *p);
  p->pid = pid;
  p->id = id;
  p->err_fd = errpipe[0];
  for (int i = 0; i < 3; i++) p->ends[i] = ends[i];
  snprintf(p->command, sizeof p->command, "%s", parts[1]);
  free(argv);
  free(parts);
}

/* One line from the runner. */
static void handle_line(char *line, size_t len) {
  line[len] = 0;
  if (strstr(line, "\"cmd\":\"NODE_")) return; /* Node's acknowledgements of our descriptors */
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
  if (plen < 0) reply_failed(id, "?", EINVAL);
  else handle_spawn(id, payload, plen, (int)pipe_size);
  free(payload);
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
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);

  const char ready[] = "{\"t\":\"ready\"}\n";
  reply(ready, sizeof ready - 1);

  size_t cap = 65536, have = 0;
  char *buf = malloc(cap);
  if (!buf) return 71;
  struct pollfd *polls = NULL;
  size_t polls_cap = 0;
  for (;;) {
    /* The channel, the SIGCHLD pipe, and the error pipe of each start not confirmed yet. */
    if (polls_cap < pending_len + 2) {
      size_t want = (pending_len + 2) * 2;
      struct pollfd *grown = realloc(polls, want * sizeof *grown);
      if (!grown) kill_all_and_exit(70);
      polls = grown;
      polls_cap = want;
    }
    polls[0] = (struct pollfd){.fd = channel, .events = POLLIN};
    polls[1] = (struct pollfd){.fd = wake[0], .events = POLLIN};
    size_t watched = pending_len;
    for (size_t i = 0; i < watched; i++) polls[i + 2] = (struct pollfd){.fd = pending[i].err_fd, .events = POLLIN};
    if (poll(polls, watched + 2, -1) < 0) {
      if (errno == EINTR) continue;
      kill_all_and_exit(71);
    }
    if (polls[1].revents) {
      char drain[64];
      while (read(wake[0], drain, sizeof drain) > 0) {
      }
      reap();
    }
    /* Starts confirmed or failed, by descriptor: confirm() reorders the table. */
    for (size_t i = 0; i < watched; i++) {
      if (!polls[i + 2].revents) continue;
      for (size_t j = 0; j < pending_len; j++) {
        if (pending[j].err_fd != polls[i + 2].fd) continue;
        confirm(j);
        break;
      }
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
    ssize_t n = recv(channel, buf + have, cap - have - 1, MSG_DONTWAIT);
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
