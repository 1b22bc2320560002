#!/bin/bash
# Runs inside the booted test system (systemd_boot.bats): checks the wattbus
# unit set under a real systemd and prints one "ok ..." or "not ok ..." line per
# check, then powers the container off.
set -u
STAGES="powerd usaged alignd estimd exportd"
ok() { echo "ok $*"; }
nok() { echo "not ok $*"; }
check() { # check DESCRIPTION command...
	local d=$1
	shift
	if "$@"; then ok "$d"; else nok "$d"; fi
}
wait_for() { # wait_for SECS command...
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.2
	done
}
prop() { systemctl show -p "$2" --value "wattbus-$1.service"; }
running() { [ "$(prop "$1" SubState)" = running ] && [ -n "$(prop "$1" StatusText)" ]; }
metrics() { curl -s --max-time 5 localhost:9102/metrics; }
joules() { metrics | sed -n 's/^kepler_node_cpu_joules_total{.*zone="package".*} \([0-9.]*\)$/\1/p'; }

for s in $STAGES; do
	if wait_for 20 running "$s"; then
		ok "wattbus-$s.service running ($(prop "$s" StatusText), user $(prop "$s" User))"
	else
		nok "wattbus-$s.service running: $(systemctl show -p ActiveState,SubState,Result,ExecMainStatus "wattbus-$s.service" | tr '\n' ' ')"
		journalctl --no-pager -o cat -u "wattbus-$s.service" | tail -5 | sed 's/^/#   /'
	fi
done

gid=$(getent group wattbus | cut -d: -f3)
check "/run/wattbus is root:wattbus 0770 (tmpfiles.d)" test "$(stat -c '%u %g %a' /run/wattbus)" = "0 $gid 770"
for s in $STAGES; do
	check "$s.sock is 0660 in group wattbus" test "$(stat -c '%g %a' "/run/wattbus/$s.sock" 2>&1)" = "$gid 660"
done
check "powerd runs as root" test "$(prop powerd User)" = root
for s in usaged alignd estimd exportd; do
	uid=$(stat -c %u "/proc/$(prop "$s" MainPID)")
	check "$s runs as a dynamic user (uid $uid)" test "$uid" -ge 61184 -a "$uid" -le 65519
done
check "usaged has exactly CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE" \
	grep -qx 'CapEff:	000000c000080000' "/proc/$(prop usaged MainPID)/status"
for s in powerd alignd estimd exportd; do
	check "$s has no capabilities" grep -qx 'CapEff:	0000000000000000' "/proc/$(prop "$s" MainPID)/status"
done
check "powerd reads the root-only energy_uj named in its EnvironmentFile (mode rapl)" \
	test "$(prop powerd StatusText)" = "mode rapl"
if [ -r /sys/kernel/btf/vmlinux ]; then
	check "usaged loads its BPF program (mode bpf)" test "$(prop usaged StatusText)" = "mode bpf"
fi

# The bus to people: a member of group wattbus can read it, anyone else cannot.
n=$(setpriv --reuid=65534 --regid="$gid" --clear-groups wattbus tap --count 1 --timeout 10s \
	ipc:///run/wattbus/usaged.sock usage/ 2>/dev/null | wc -l)
check "a user in group wattbus reads the bus" test "$n" = 1
n=$(setpriv --reuid=65534 --regid=65534 --clear-groups wattbus tap --count 1 --timeout 3s \
	ipc:///run/wattbus/usaged.sock 2>/dev/null | wc -l)
check "a user outside group wattbus does not" test "$n" = 0

# Energy through the whole pipeline: 20 W on the fake package zone.
e=1000000
for _ in $(seq 1 12); do
	e=$((e + 10000000))
	echo $e >/opt/wbfake/sys/class/powercap/intel-rapl:0/energy_uj
	sleep 0.5
done
j=$(joules)
check "kepler_node_cpu_joules_total grows from the fake meter (${j:-none} J)" awk -v j="${j:-0}" 'BEGIN { exit !(j > 10) }'
for s in $STAGES; do
	check "wattbus_stage_up for $s" bash -c "curl -s localhost:9102/metrics | grep -q '^wattbus_stage_up{.*stage=\"$s\".*} 1'"
done

systemctl reload wattbus-alignd
check "systemctl reload: SIGHUP reloads alignd" wait_for 5 bash -c \
	"journalctl --no-pager -o cat -u wattbus-alignd | grep -q '^info: reloaded'"

systemctl stop wattbus-estimd
check "stopping estimd leaves the other sockets and stages alone" bash -c \
	'ls /run/wattbus/powerd.sock /run/wattbus/alignd.sock >/dev/null && [ "$(systemctl is-active wattbus-alignd)" = active ]'

mkdir -p /etc/systemd/system/wattbus-alignd.service.d
printf '[Service]\nWatchdogSec=2s\n' >/etc/systemd/system/wattbus-alignd.service.d/watchdog.conf
systemctl daemon-reload
systemctl restart wattbus-alignd
wait_for 10 running alignd
kill -STOP "$(prop alignd MainPID)"
check "a hung alignd is restarted by the watchdog" wait_for 10 bash -c \
	"journalctl --no-pager -o cat -u wattbus-alignd | grep -q \"Failed with result 'watchdog'\""
check "and runs again" wait_for 10 running alignd

check "a usage error (exit 2) is not restarted" bash -c '
	echo "WATTBUS_EXPORTD_OPTS=\"--listen nowhere\"" >"$(systemctl show -p EnvironmentFiles --value wattbus-exportd | cut -d" " -f1)"
	systemctl restart wattbus-exportd 2>/dev/null; sleep 3
	[ "$(systemctl show -p ExecMainStatus --value wattbus-exportd)" = 2 ] &&
	[ "$(systemctl show -p ActiveState --value wattbus-exportd)" = failed ]'

systemctl stop wattbus.target
check "stopping wattbus.target stops every stage" bash -c \
	'! systemctl is-active -q wattbus-powerd wattbus-usaged wattbus-alignd wattbus-exportd'
echo "done"
systemctl poweroff --no-block 2>/dev/null || kill -s SIGRTMIN+4 1
