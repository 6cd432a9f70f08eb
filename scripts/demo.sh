#!/usr/bin/env bash
# A real restricted run: the sandboxed command reaches one allowed host
# through cordon's proxy, is refused another, and both decisions show in
# `cordon audit`. Run by `make demo` after scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(pwd)/bin/cordon
[ -x "$bin" ] || { echo "demo: build cordon first (make build)" >&2; exit 1; }

# cordon never runs a sandbox as root's root: as root, the demo runs as the
# unprivileged user scripts/setup.sh created.
as_user() { if [ "$(id -u)" = 0 ]; then runuser -u cordontest -- "$@"; else "$@"; fi; }

demo=$(mktemp -d /tmp/cordon-demo.XXXXXX)
chmod 755 "$demo"
mkdir -p "$demo/bin" "$demo/project" "$demo/state" "$demo/site"
cp "$bin" "$demo/bin/cordon"
echo "hello from an allowed host" > "$demo/site/index.html"
[ "$(id -u)" = 0 ] && chown -R cordontest "$demo/project" "$demo/state"
cleanup() { kill "$server" 2>/dev/null || true; rm -rf "$demo"; }
trap cleanup EXIT

# The allowed host: a web server on this machine's loopback, named
# demo.cordon.test for the run.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$demo/site" >/dev/null 2>&1 &
server=$!
for _ in $(seq 50); do curl -s "http://127.0.0.1:$port/" >/dev/null && break; sleep 0.1; done

audit="$demo/state/audit.jsonl"
echo "== cordon run --net restricted --allow demo.cordon.test:$port -- sh -c '...'"
set +e
as_user env -C "$demo/project" HOME="$demo/state" "$demo/bin/cordon" run --net restricted --ephemeral-ca --audit "$audit" \
  --allow "demo.cordon.test:$port" --allow "127.0.0.1:$port" --resolve "demo.cordon.test=127.0.0.1" \
  -- sh -c "
    echo '-- allowed:'; curl -sS --fail http://demo.cordon.test:$port/
    echo '-- denied:';  curl -sS --fail https://example.com/ || echo '(refused, as it should be)'
    echo '-- denied, ignoring the proxy:'; curl -sS --noproxy '*' https://example.com/ || echo '(refused: no such name inside the box)'
  "
status=$?
set -e
echo
echo "== cordon audit (this run)"
as_user "$demo/bin/cordon" audit --file "$audit"
echo
echo "== cordon audit --summary"
as_user "$demo/bin/cordon" audit --file "$audit" --summary
exit $status
