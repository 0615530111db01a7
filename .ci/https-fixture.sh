#!/usr/bin/env bash
# Makes what a host serving HTTPS needs, in the directory DIR (created): a throwaway CA
# (ca.pem), a server certificate for 127.0.0.1 signed by it (server.pem, server.key), a random
# token (token), and examples/fleet.toml copied as fleet.toml with those in its [host] section.
# The key and token files are private (mode 600), as the host demands. Prints the token.
#
# Usage: .ci/https-fixture.sh DIR
set -euo pipefail
dir=$1
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir"
cd "$dir"
umask 077
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=flowscale CI test CA" -keyout ca.key -out ca.pem 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -subj "/CN=127.0.0.1" -keyout server.key -out server.csr 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\nauthorityKeyIdentifier=keyid\nsubjectKeyIdentifier=hash\n' >server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
    -extfile server.ext -out server.pem 2>/dev/null
rm -f server.csr server.ext ca.srl
chmod 644 ca.pem server.pem
token=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
printf '%s\n' "$token" >token
ln -sfn "$repo/examples/jobs" jobs
sed 's|^\[host\]$|[host]\napi-token-file = "token"\ntls-cert-file = "server.pem"\ntls-key-file = "server.key"|' \
    "$repo/examples/fleet.toml" >fleet.toml
echo "$token"
