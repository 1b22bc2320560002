# Two hosts made of network namespaces joined by a veth pair, for the suites that put a
# network between stages (tcp:// with CURVE). Load after helper; teardown deletes NS1 and NS2
# (set before they are made, so that a setup cut short leaves none behind).

# netns_need: skip without root or without working network namespaces.
netns_need() {
	[ "$(id -u)" -eq 0 ] || skip "needs root for network namespaces"
	ip netns add "wbchk$$" 2>/dev/null && ip netns del "wbchk$$" || skip "ip netns does not work here"
}

# netns_pair TAG NET: namespaces NS1 and NS2 (wbTAG1N$$, wbTAG2N$$), their addresses IP1=NET.N.1
# and IP2=NET.N.2 on a veth pair, lo and the pair up. N (20 to 219) is random, so that suites
# running side by side do not meet.
netns_pair() {
	local tag=$1 net=$2
	N=$((RANDOM % 200 + 20))
	NS1=wb${tag}1$N$$
	NS2=wb${tag}2$N$$
	IP1=$net.$N.1
	IP2=$net.$N.2
	ip netns add "$NS1"
	ip netns add "$NS2"
	ip link add "${tag}1$N$$" type veth peer name "${tag}2$N$$"
	ip link set "${tag}1$N$$" netns "$NS1"
	ip link set "${tag}2$N$$" netns "$NS2"
	ip -n "$NS1" addr add "$IP1/24" dev "${tag}1$N$$"
	ip -n "$NS2" addr add "$IP2/24" dev "${tag}2$N$$"
	for ns in "$NS1" "$NS2"; do ip -n "$ns" link set lo up; done
	ip -n "$NS1" link set "${tag}1$N$$" up
	ip -n "$NS2" link set "${tag}2$N$$" up
}

# curve_keys ALLOWDIR ALLOWED NAME...: a CURVE certificate $K/NAME for each name (K is the test's
# keys folder), and $K/ALLOWDIR the folder of allowed clients holding ALLOWED's.
curve_keys() {
	local allowdir=$1 allowed=$2 c
	shift 2
	K=$BATS_TEST_TMPDIR/keys
	mkdir -p "$K/$allowdir"
	for c in "$@"; do "$WATTBUS" keygen "$K/$c" >/dev/null; done
	cp "$K/$allowed" "$K/$allowdir/"
}

# fake_rapl UJ: a RAPL package zone $Z under the sysfs root $SYS, its counter at UJ.
fake_rapl() {
	SYS=$BATS_TEST_TMPDIR/sys
	Z=$SYS/class/powercap/intel-rapl:0
	mkdir -p "$Z"
	echo package-0 >"$Z/name"
	echo 262143328850 >"$Z/max_energy_range_uj"
	echo "$1" >"$Z/energy_uj"
}

# fake_rapl_10w: fake_rapl advanced by 1 J every 100 ms (a file replaced whole, as sysfs reads).
fake_rapl_10w() {
	fake_rapl 1000000
	cat >"$BATS_TEST_TMPDIR/meter.sh" <<-EOF
		e=1000000
		while :; do e=\$((e + 1000000)); echo \$e >"$Z/energy_uj.t" && mv "$Z/energy_uj.t" "$Z/energy_uj"; sleep 0.1; done
	EOF
	wb_spawn meter bash "$BATS_TEST_TMPDIR/meter.sh"
}
