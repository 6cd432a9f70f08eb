#!/usr/bin/env bash
# Installs everything cordon's demo and tests need on a Debian machine.
# Run as root (or through sudo). Idempotent.
set -euo pipefail
[ "$(id -u)" = 0 ] || exec sudo -E "$0" "$@"

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
  bubblewrap util-linux nftables iproute2 iputils-ping uidmap procps \
  curl git ca-certificates openssl python3 nodejs \
  openssh-client openssh-server make gcc >/dev/null

# Go 1.26 or newer is expected at /usr/local/go (the machine image has it).
export PATH=/usr/local/go/bin:$HOME/go/bin:$PATH
command -v go >/dev/null || { echo "setup: Go is not installed; install Go 1.26 into /usr/local/go" >&2; exit 1; }
command -v staticcheck >/dev/null || go install honnef.co/go/tools/cmd/staticcheck@latest

# The unprivileged user the integration tests run the sandbox as.
id cordontest >/dev/null 2>&1 || useradd --create-home --shell /bin/bash cordontest
usermod -p '*' cordontest   # no password, but not locked: key logins (the ssh test) work
# /dev/net/tun usable by unprivileged users, as the test machines are
# specified (cordon itself no longer needs it: its restricted network has
# no tap device).
[ -c /dev/net/tun ] || { mkdir -p /dev/net && mknod /dev/net/tun c 10 200; }
chmod 0666 /dev/net/tun
# Unprivileged user namespaces (Debian and Ubuntu knobs; absent elsewhere).
[ -w /proc/sys/kernel/unprivileged_userns_clone ] && echo 1 >/proc/sys/kernel/unprivileged_userns_clone || true
[ -w /proc/sys/kernel/apparmor_restrict_unprivileged_userns ] && echo 0 >/proc/sys/kernel/apparmor_restrict_unprivileged_userns || true
echo "setup: ok"
