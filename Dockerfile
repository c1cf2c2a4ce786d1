# gangcheck's container image:  docker build -t gangcheck:0.1.0 .
# (`make image` builds the same image without a Docker daemon: image/build.sh.) Both read the same
# pinned lists — image/debian-packages.txt, image/requirements.lock, image/build-requirements.lock —
# and run the same steps (image/rootfs-setup.sh, image/install-python.sh); `make lock` refreshes
# the lists. tests/test_image_recipe.py checks that this file reads them.
#
# The final image: Debian bookworm (slim) + python3, gangcheck and its dependencies in
# /usr/local/lib/python3.11/dist-packages (byte-compiled), user 65532, no pip, no compiler;
# runs with a read-only root filesystem (it writes nothing).

FROM debian:bookworm-slim AS base
COPY image/dpkg-excludes.cfg /etc/dpkg/dpkg.cfg.d/gangcheck
COPY image/debian-packages.txt image/rootfs-setup.sh /tmp/image/
# A pinned version Debian no longer serves (a security update replaced it): install the current
# one with a warning, as make image does (run `make lock` to refresh the pins).
RUN apt-get update \
 && ( grep -v '^\s*\(#\|$\)' /tmp/image/debian-packages.txt \
        | xargs env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      || { echo "WARNING: pinned Debian versions not served; installing the current ones (run: make lock)" >&2; \
           grep -v '^\s*\(#\|$\)' /tmp/image/debian-packages.txt | sed 's/=.*//' \
             | xargs env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends; } ) \
 && sh /tmp/image/rootfs-setup.sh / \
 && rm -rf /tmp/image

# pip runs here only; what it installs is copied into the final stage.
FROM base AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-pip
COPY image/install-python.sh image/requirements.lock image/build-requirements.lock /src/image/
RUN sh /src/image/install-python.sh deps /out/deps \
 && sh /src/image/install-python.sh compile /out/deps
COPY pyproject.toml README.md /src/
COPY webhook /src/webhook
COPY image/gangcheck /src/image/gangcheck
RUN sh /src/image/install-python.sh wheel /src /tmp/dist \
 && sh /src/image/install-python.sh app /tmp/dist/gangcheck-*.whl /out/app \
 && sh /src/image/install-python.sh compile /out/app/webhook

FROM base
COPY --from=build /out/deps/ /usr/local/lib/python3.11/dist-packages/
COPY --from=build /out/app/ /usr/local/lib/python3.11/dist-packages/
COPY --chmod=0755 image/gangcheck /usr/local/bin/gangcheck
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HOME=/home/nonroot
USER 65532:65532
EXPOSE 8443
LABEL org.opencontainers.image.title=gangcheck org.opencontainers.image.licenses=Apache-2.0
ENTRYPOINT ["gangcheck"]
CMD ["serve", "--cluster", "live"]
