#!/wrapper-server-tools/busybox sh
# fnr wrapper-server launcher: /wrapper-server-tools/wrapper-server in a function pod.
# (scripts/package-wrapper.mjs installs it; docs/process.md "How zombies are reaped".)
#
# Function pods run this as the container's first process: PID 1 of the pod's pid namespace.
# Orphans of the function (setsid daemons, double forks, processes a call's sweep killed) are
# re-parented to PID 1, and Node waits only for the children it started. So, as PID 1, this
# static busybox shell runs the wrapper (wrapper-server-sea) as its child and waits: busybox
# ash's wait reaps every child that exits, with waitpid(-1), orphans included. It forwards TERM,
# INT, HUP, QUIT and USR2 to the wrapper and exits with the wrapper's status. Not USR1: a Node
# process may take that as "open the inspector" (the wrapper refuses it anyway), and with no trap
# for it the kernel drops it at PID 1. Not PID 1 (shareProcessNamespace, a host), it execs the
# wrapper: no extra process.
#
# The shell rewrites the environment it hands on (it adds PWD, SHLVL and PATH, and drops names
# that are not shell identifiers, such as a.b, which Kubernetes allows), and the wrapper passes
# its environment to the function. So the environment the kernel gave this shell goes along as
# it was, base64-encoded in FNRW_LAUNCHER_ENVIRON, and the wrapper restores it before anything
# else (src/bin/wrapper-server.ts). An environment over ~96 KiB is left to the shell.
case $0 in
*/*) d=${0%/*} ;;
*) d=. ;;
esac
if e=$("$d/busybox" base64 -w 0 "/proc/$$/environ" 2>/dev/null) && [ "${#e}" -lt 131000 ]; then
	export FNRW_LAUNCHER_ENVIRON="$e"
fi
unset e
[ "$$" = 1 ] || exec "$d/wrapper-server-sea" "$@"

"$d/wrapper-server-sea" "$@" <&0 &
pid=$!
for s in TERM INT HUP QUIT USR2; do
	trap "kill -$s $pid 2>/dev/null" "$s"
done
while :; do
	wait "$pid"
	status=$?
	# Over 128: a forwarded signal interrupted wait (or the wrapper died of a signal).
	[ "$status" -gt 128 ] || break
	kill -0 "$pid" 2>/dev/null && continue
	# Gone: its status, unless wait collected it already (127, unknown pid).
	wait "$pid"
	s=$?
	[ "$s" = 127 ] || status=$s
	break
done
exit "$status"
