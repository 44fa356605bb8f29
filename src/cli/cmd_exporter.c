/*
 * cmd_exporter -- tdax exporter (cmd_exporter.h). One connection at a time,
 * each bounded by a timeout, so a client that stalls holds nobody up for
 * long: GET /metrics answers with tdax metrics' text, anything else with
 * 404 (405 for another method). The device stays open (its counters are
 * read at each scrape); SIGINT or SIGTERM ends the server.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cmd_exporter.h"
#include "cli/cmd_status.h"
#include "cli/out.h"
#include "core/device.h"
#include "core/env.h"

#define DEFAULT_LISTEN "127.0.0.1:9477"
#define CLIENT_TIMEOUT_S 5

static const char exporter_help[] =
	"usage: tdax exporter [--device PATH] [--listen ADDR:PORT]\n"
	"\n"
	"Serve the device's metrics (tdax metrics) over HTTP at /metrics, for Prometheus.\n"
	"  --listen ADDR:PORT  an IPv4 address and port (default " DEFAULT_LISTEN ", loopback;\n"
	"                      port 0 picks a free one). Another address exposes the\n"
	"                      metrics -- file paths among them -- to whoever reaches it.\n"
	"The first line on stdout says where it listens. Runs until SIGINT or SIGTERM.\n";

/* ADDR:PORT into sa; 0, or -1 if it is not one. */
static int parse_listen(const char *s, struct sockaddr_in *sa)
{
	const char *colon = strrchr(s, ':');
	char host[64], *end;
	if (!colon || (size_t)(colon - s) >= sizeof(host))
		return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	errno = 0;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (errno || end == colon + 1 || *end || port > 65535)
		return -1;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return; /* the client went away, or stalled past the timeout */
		p += w;
		n -= (size_t)w;
	}
}

static void respond(int fd, const char *status, const char *type, const char *body, size_t len)
{
	char head[256];
	int n = snprintf(head, sizeof(head), "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n", status, type, len);
	write_all(fd, head, (size_t)n);
	write_all(fd, body, len);
}

/* Read the request's head (up to its blank line, 8 KiB at most) and answer. */
static void serve(int fd, const struct tdax_device *dev)
{
	char req[8192];
	size_t have = 0;
	while (have < sizeof(req) - 1) {
		ssize_t r = recv(fd, req + have, sizeof(req) - 1 - have, 0);
		if (r <= 0)
			return;
		have += (size_t)r;
		req[have] = '\0';
		if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
			break;
	}
	req[have] = '\0';
	static const char text[] = "text/plain; charset=utf-8";
	if (strncmp(req, "GET ", 4) != 0) {
		respond(fd, "405 Method Not Allowed", text, "GET /metrics only\n", 18);
		return;
	}
	size_t plen = strcspn(req + 4, " \r\n");
	if (!((plen == 8 && strncmp(req + 4, "/metrics", 8) == 0) ||
	      (plen > 8 && strncmp(req + 4, "/metrics?", 9) == 0))) {
		respond(fd, "404 Not Found", text, "the metrics are at /metrics\n", 28);
		return;
	}
	char *body = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&body, &len);
	if (!out) {
		respond(fd, "500 Internal Server Error", text, "out of memory\n", 14);
		return;
	}
	tdax_metrics_write(out, dev);
	fclose(out);
	respond(fd, "200 OK", "text/plain; version=0.0.4; charset=utf-8", body, len);
	free(body);
}

int cmd_exporter(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "device", required_argument, 0, 'd' }, { "listen", required_argument, 0, 'l' },
		{ "allow-shared", no_argument, 0, 'a' }, { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	const char *path = tdax_env_device(), *listen_at = DEFAULT_LISTEN;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': path = optarg; break;
		case 'l': listen_at = optarg; break;
		case 'a': setenv("TDAX_ALLOW_SHARED", "1", 1); break;
		case 'h': fputs(exporter_help, stdout); return EXIT_OK;
		default: return usage_error("exporter", "%s", "unknown option");
		}
	}
	if (optind < argc)
		return usage_error("exporter", "unexpected argument '%s'", argv[optind]);
	struct sockaddr_in sa;
	if (parse_listen(listen_at, &sa) != 0)
		return usage_error("exporter", "--listen '%s' is not IPV4ADDR:PORT", listen_at);
	struct tdax_err e;
	struct tdax_device *dev;
	if (tdax_device_open(path, admin_flags(path), &dev, &e))
		return fail(&e);
	int one = 1, s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	socklen_t slen = sizeof(sa);
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(s, 16) != 0 ||
	    getsockname(s, (struct sockaddr *)&sa, &slen) != 0) {
		tdax_errf(&e, "cannot listen on %s: %s (another server on that port? choose one with "
			  "--listen)", listen_at, strerror(errno));
		tdax_device_close(dev);
		return fail(&e);
	}
	char addr[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &sa.sin_addr, addr, sizeof(addr));
	printf("tdax exporter: serving http://%s:%u/metrics for ", addr, ntohs(sa.sin_port));
	text_str(stdout, dev->path, sizeof(dev->path));
	printf("\n");
	fflush(stdout);
	struct timeval tv = { .tv_sec = CLIENT_TIMEOUT_S };
	for (;;) {
		int fd = accept4(s, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE)
				continue;
			tdax_errf(&e, "accept on %s failed: %s", listen_at, strerror(errno));
			break;
		}
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		serve(fd, dev);
		close(fd);
	}
	close(s);
	tdax_device_close(dev);
	return fail(&e);
}
