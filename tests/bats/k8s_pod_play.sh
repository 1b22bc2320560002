#!/bin/bash
# Play the DaemonSet's pod with podman (inside k8s_cgroupfs.sh), wait for
# exportd's /metrics to show the node's energy and all five stages up, scrape
# twice, save each container's log, and remove the pod whatever happened.
#   k8s_pod_play.sh PLAY_YAML POD_NAME OUT_DIR
# Out: OUT_DIR/metrics1, metrics2 (the second once the package energy grew),
# OUT_DIR/<container>.log, OUT_DIR/ip.
set -u
play=$1 name=$2 out=$3
cleanup() {
	for c in powerd usaged alignd estimd exportd; do
		podman logs "$name-$c" >"$out/$c.log" 2>&1
	done
	podman pod rm -f "$name" >/dev/null 2>&1
}
trap cleanup EXIT
podman kube play "$play" >"$out/play.log" 2>&1 || { cat "$out/play.log"; exit 1; }
infra=$(podman pod inspect "$name" --format '{{.InfraContainerID}}')
ip=$(podman inspect "$infra" --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}')
echo "$ip" >"$out/ip"
package() { sed -n 's/^kepler_node_cpu_joules_total{.*zone="package".*} //p' "$1"; }
up() { grep -c '^wattbus_stage_up{.*} 1$' "$1"; }
end=$((SECONDS + 180))
until curl -sf --max-time 5 "http://$ip:9102/metrics" >"$out/metrics1" && [ -n "$(package "$out/metrics1")" ] &&
	[ "$(up "$out/metrics1")" -ge 5 ]; do
	[ $SECONDS -lt $end ] || { echo "no energy or not every stage up on $ip:9102 within 180 s"; exit 1; }
	sleep 1
done
first=$(package "$out/metrics1")
until curl -sf --max-time 5 "http://$ip:9102/metrics" >"$out/metrics2" &&
	awk -v a="$first" -v b="$(package "$out/metrics2")" 'BEGIN { exit !(b > a) }'; do
	[ $SECONDS -lt $end ] || { echo "package energy stayed at $first"; exit 1; }
	sleep 1
done
echo "played $name: package $first J, then $(package "$out/metrics2") J"
