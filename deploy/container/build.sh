#!/usr/bin/env bash
# Builds hookgate's container image, pulling nothing:
#
#   deploy/container/build.sh [--platform linux/amd64|linux/arm64] [<tag>]
#
# (default: the build host's platform, and hookgate:latest). First a
# static binary with the local Go toolchain for the platform (GOOS, GOARCH;
# CGO_ENABLED=0, -trimpath; its version, `hookgate version`, is the commit
# when built from a clone), then Containerfile FROM scratch around it,
# labelled with that platform, with podman, or docker when podman is
# missing (HOOKGATE_ENGINE=docker chooses). A scratch image runs nothing at
# build time, so building for another architecture needs no emulator.
set -euo pipefail
usage="usage: build.sh [--platform linux/amd64|linux/arm64] [<tag>]"
platform=
while [ $# -gt 0 ]; do
	case $1 in
	--platform) [ $# -ge 2 ] || { echo "build.sh: --platform needs a value; $usage" >&2; exit 2; }; platform=$2; shift 2 ;;
	--platform=*) platform=${1#--platform=}; shift ;;
	-*) echo "build.sh: unknown flag $1; $usage" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -le 1 ] || { echo "build.sh: one tag at most; $usage" >&2; exit 2; }
tag=${1:-hookgate:latest}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ -z "$platform" ]; then
	platform=linux/$(cd "$root" && go env GOARCH)
fi
case $platform in
linux/amd64 | linux/arm64) ;;
*) echo "build.sh: platform $platform: want linux/amd64 or linux/arm64" >&2; exit 2 ;;
esac
goarch=${platform#linux/}

engine=${HOOKGATE_ENGINE:-}
if [ -z "$engine" ]; then
	if command -v podman >/dev/null; then
		engine=podman
	elif command -v docker >/dev/null; then
		engine=docker
	else
		echo "build.sh: neither podman nor docker is installed (Debian: apt-get install podman)" >&2
		exit 1
	fi
fi
ca=/etc/ssl/certs/ca-certificates.crt
if [ ! -r "$ca" ]; then
	echo "build.sh: no CA bundle at $ca (Debian: apt-get install ca-certificates)" >&2
	exit 1
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
# -buildvcs=auto stamps the commit whatever GOFLAGS says (Go finds it in a
# clone, not in a git worktree); -s -w leave out the symbol table and DWARF.
(cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH="$goarch" go build -buildvcs=auto -trimpath -ldflags='-s -w' -o "$ctx/hookgate" ./cmd/hookgate)
cp "$ca" "$ctx/ca-certificates.crt"
cp "$here/Caddyfile" "$ctx/Caddyfile"
mkdir "$ctx/data"

args=(build -f "$here/Containerfile" -t "$tag" --platform "$platform")
# FROM scratch has nothing to pull; podman is told so (docker's --pull is
# a yes or no, and no is its default).
if [ "$engine" = podman ]; then
	args+=(--pull=never)
fi
if rev=$(git -C "$root" rev-parse HEAD 2>/dev/null); then
	args+=(--label "org.opencontainers.image.revision=$rev")
fi
"$engine" "${args[@]}" "$ctx"
