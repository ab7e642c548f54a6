#!/usr/bin/env bash
# Serving certificate for the etcd-guard webhook, for clusters without cert-manager.
#
# Creates a private CA and a serving cert for the webhook Service's DNS names (openssl, in a temp
# dir), stores the cert in the Secret the Deployment mounts, and writes the CA into caBundle of
# every webhook entry of the ValidatingWebhookConfiguration, so the kube-apiserver trusts it.
# The CA key is never stored: to renew, run the script again (it makes a new CA and cert, and
# updates Secret and caBundle together).
set -euo pipefail

NAMESPACE="etcd-guard"
SERVICE="etcd-guard-webhook"
SECRET="etcd-guard-webhook-tls"
WEBHOOK_CONFIG="etcd-guard"
DAYS="365"
OUT_DIR=""
DRY_RUN="false"
KUBECTL="${KUBECTL:-kubectl}"

usage() {
  cat <<EOF
Usage: $(basename "$0") [options]

Creates a CA and a serving certificate for the etcd-guard webhook Service, then
  1. creates or updates the TLS Secret "${SECRET}" in namespace "${NAMESPACE}"
     (kubectl create secret tls ... --dry-run=client -o yaml | kubectl apply -f -), and
  2. patches the CA into caBundle of every webhook in the ValidatingWebhookConfiguration
     "${WEBHOOK_CONFIG}" (kubectl patch --type=json).

Options:
  --namespace NS         namespace of the webhook Service and Secret (default: ${NAMESPACE})
  --service NAME         webhook Service name (default: ${SERVICE})
  --secret NAME          TLS Secret name (default: ${SECRET})
  --webhook-config NAME  ValidatingWebhookConfiguration name (default: ${WEBHOOK_CONFIG})
  --days N               validity of CA and cert in days (default: ${DAYS})
  --out DIR              only write ca.crt, tls.crt and tls.key to DIR; touch no cluster
  --dry-run              make the cert in a temp dir and print the kubectl commands instead of
                         running them (with --out, the files are kept in DIR)
  -h, --help             show this help

Environment:
  KUBECTL                kubectl binary to use (default: kubectl)
EOF
}

die() {
  echo "make-webhook-cert: $*" >&2
  exit 2
}

need_value() {
  # $1 flag, $2 number of remaining args including the flag
  if [ "$2" -lt 2 ]; then die "$1 needs a value"; fi
}

while [ $# -gt 0 ]; do
  case "$1" in
    --namespace) need_value "$1" $#; NAMESPACE="$2"; shift 2 ;;
    --service) need_value "$1" $#; SERVICE="$2"; shift 2 ;;
    --secret) need_value "$1" $#; SECRET="$2"; shift 2 ;;
    --webhook-config) need_value "$1" $#; WEBHOOK_CONFIG="$2"; shift 2 ;;
    --days) need_value "$1" $#; DAYS="$2"; shift 2 ;;
    --out) need_value "$1" $#; OUT_DIR="$2"; shift 2 ;;
    --dry-run) DRY_RUN="true"; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument \"$1\"" ;;
  esac
done

DNS_LABEL='^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'
[[ "$NAMESPACE" =~ $DNS_LABEL ]] || die "invalid --namespace \"${NAMESPACE}\" (want a DNS label)"
[[ "$SERVICE" =~ $DNS_LABEL ]] || die "invalid --service \"${SERVICE}\" (want a DNS label)"
[[ "$DAYS" =~ ^[1-9][0-9]*$ ]] || die "invalid --days \"${DAYS}\" (want a positive whole number)"
command -v openssl >/dev/null 2>&1 || die "openssl not found on PATH"

WORK_DIR="$(mktemp -d)"
# The CA key lives only here and is removed on every exit path.
trap 'rm -rf "$WORK_DIR"' EXIT
umask 077

SERVICE_HOST="${SERVICE}.${NAMESPACE}.svc"
echo "make-webhook-cert: making a CA and a serving cert for ${SERVICE_HOST} (valid ${DAYS} days)" >&2

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout "$WORK_DIR/ca.key" -out "$WORK_DIR/ca.crt" -days "$DAYS" \
  -subj "/CN=etcd-guard webhook CA" \
  -addext "basicConstraints=critical,CA:TRUE,pathlen:0" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null

openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout "$WORK_DIR/tls.key" -out "$WORK_DIR/tls.csr" \
  -subj "/CN=${SERVICE_HOST}" 2>/dev/null

cat >"$WORK_DIR/serving.ext" <<EOF
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:${SERVICE},DNS:${SERVICE}.${NAMESPACE},DNS:${SERVICE_HOST},DNS:${SERVICE_HOST}.cluster.local
EOF

openssl x509 -req -in "$WORK_DIR/tls.csr" -CA "$WORK_DIR/ca.crt" -CAkey "$WORK_DIR/ca.key" \
  -CAcreateserial -out "$WORK_DIR/tls.crt" -days "$DAYS" -sha256 \
  -extfile "$WORK_DIR/serving.ext" 2>/dev/null

openssl verify -CAfile "$WORK_DIR/ca.crt" "$WORK_DIR/tls.crt" >/dev/null \
  || die "the generated serving cert does not verify against its CA"

if [ -n "$OUT_DIR" ]; then
  mkdir -p "$OUT_DIR"
  cp "$WORK_DIR/ca.crt" "$WORK_DIR/tls.crt" "$WORK_DIR/tls.key" "$OUT_DIR/"
  echo "make-webhook-cert: wrote ${OUT_DIR}/ca.crt, ${OUT_DIR}/tls.crt, ${OUT_DIR}/tls.key" >&2
  if [ "$DRY_RUN" = "false" ]; then exit 0; fi
fi

CA_BUNDLE="$(base64 <"$WORK_DIR/ca.crt" | tr -d '\n')"

run() {
  if [ "$DRY_RUN" = "true" ]; then
    echo "+ $*"
  else
    "$@"
  fi
}

echo "make-webhook-cert: storing the cert in Secret ${NAMESPACE}/${SECRET}" >&2
if [ "$DRY_RUN" = "true" ]; then
  echo "+ ${KUBECTL} create secret tls ${SECRET} --namespace ${NAMESPACE} --cert=tls.crt --key=tls.key --dry-run=client -o yaml | ${KUBECTL} apply -f -"
else
  "$KUBECTL" create secret tls "$SECRET" --namespace "$NAMESPACE" \
    --cert="$WORK_DIR/tls.crt" --key="$WORK_DIR/tls.key" --dry-run=client -o yaml \
    | "$KUBECTL" apply -f -
fi

# One "add" per webhook entry ("add" replaces an existing caBundle), so a configuration with
# several webhooks gets the CA in each of them.
if [ "$DRY_RUN" = "true" ]; then
  WEBHOOK_COUNT=1
else
  WEBHOOK_NAMES="$("$KUBECTL" get validatingwebhookconfiguration "$WEBHOOK_CONFIG" \
    -o jsonpath='{range .webhooks[*]}{.name}{"\n"}{end}')"
  WEBHOOK_COUNT="$(printf '%s\n' "$WEBHOOK_NAMES" | grep -c . || true)"
  if [ "$WEBHOOK_COUNT" -eq 0 ]; then
    die "ValidatingWebhookConfiguration \"${WEBHOOK_CONFIG}\" has no webhooks (apply manifests/base first)"
  fi
fi

PATCH="["
for ((i = 0; i < WEBHOOK_COUNT; i++)); do
  if [ "$i" -gt 0 ]; then PATCH+=","; fi
  PATCH+="{\"op\":\"add\",\"path\":\"/webhooks/${i}/clientConfig/caBundle\",\"value\":\"${CA_BUNDLE}\"}"
done
PATCH+="]"

echo "make-webhook-cert: writing caBundle into ${WEBHOOK_COUNT} webhook(s) of ValidatingWebhookConfiguration ${WEBHOOK_CONFIG}" >&2
run "$KUBECTL" patch validatingwebhookconfiguration "$WEBHOOK_CONFIG" --type=json -p "$PATCH"
echo "make-webhook-cert: done" >&2
