//go:build linux

package integration

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
)

// localRouteScript runs in a network namespace of its own ($1 is a
// directory of the test user's, $2 cordon): a local route makes all of
// 10.77.0.0/24 this host's (AnyIP, as a cloud VM's IPv6 range is), a
// service listens on the unspecified address, and a name pinned to an
// address of that range is asked for through the proxy. Then an address
// comes up while the proxy runs (as a VPN's does), and a name pinned to
// it is asked for, before and a little over a second after.
const localRouteScript = `
set -e
dir=$1 cordon=$2
ip link set lo up
ip route add local 10.77.0.0/24 dev lo
mkdir "$dir/www" && echo "host-only service" > "$dir/www/index.html"
cd "$dir/www" && python3 -m http.server --bind 0.0.0.0 7777 >/dev/null 2>&1 &
web=$!
"$cordon" proxy --audit "$dir/audit.jsonl" --ephemeral-ca --allow svc.cordon.test:7777 --resolve=svc.cordon.test=10.77.0.9 \
	--allow late.cordon.test:7777 --resolve=late.cordon.test=10.66.0.1 >"$dir/env" 2>/dev/null &
proxy=$!
trap 'kill $web $proxy' EXIT
for i in $(seq 100); do grep -q no_proxy "$dir/env" && curl -s -o /dev/null --noproxy '*' http://127.0.0.1:7777/ && break; sleep 0.1; done
. "$dir/env"
echo "direct: $(curl -sS -m 5 --noproxy '*' http://10.77.0.9:7777/ 2>&1)"
echo "proxied: $(curl -sS -m 5 -x "$HTTPS_PROXY" http://svc.cordon.test:7777/ 2>&1)"
echo "late, before: $(curl -sS -m 5 -x "$HTTPS_PROXY" http://late.cordon.test:7777/ 2>&1)"
ip addr add 10.66.0.1/32 dev lo
sleep 1.5
echo "late, direct: $(curl -sS -m 5 --noproxy '*' http://10.66.0.1:7777/ 2>&1)"
echo "late, proxied: $(curl -sS -m 5 -x "$HTTPS_PROXY" http://late.cordon.test:7777/ 2>&1)"
`

// TestProxyLocalRouteIsOwn: an address the kernel delivers to this host
// through a local route (not an interface address) is this host's, and
// is not dialled unless allowed by address; so is an address that comes
// up while the session runs.
func TestProxyLocalRouteIsOwn(t *testing.T) {
	dir := userDir(t, "cordon-it-localroute-")
	cmd := asUser(t, nil, "unshare", "--user", "--map-root-user", "--net", "sh", "-c", localRouteScript, "sh", dir, cordonBin(t))
	out, err := run(t, 60*time.Second, cmd)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "direct: host-only service") {
		t.Fatalf("the local route does not reach the service, so the test proves nothing:\n%s", out)
	}
	if strings.Contains(out, "\nproxied: host-only service") || !strings.Contains(out, "\nproxied: cordon: blocked_address") {
		t.Fatalf("a name pinned to a local-route address was dialled:\n%s", out)
	}
	if !strings.Contains(out, "late, direct: host-only service") {
		t.Fatalf("the address that came up does not reach the service, so the test proves nothing:\n%s", out)
	}
	if !strings.Contains(out, "late, proxied: cordon: blocked_address") {
		t.Fatalf("a name pinned to an address that came up during the session was dialled:\n%s", out)
	}
	path := filepath.Join(dir, "audit.jsonl")
	waitRecord(t, path, audit.Record{Type: audit.TypeDecision, Host: "svc.cordon.test", Decision: audit.Deny, Reason: "blocked_address"})
	if r, ok := findRecord(readAudit(t, path), audit.Record{Host: "svc.cordon.test", Decision: audit.Allow}); ok {
		t.Fatalf("allowed: %+v", r)
	}
	waitRecord(t, path, audit.Record{Type: audit.TypeDecision, Host: "late.cordon.test", Decision: audit.Deny, Reason: "blocked_address"})
}
