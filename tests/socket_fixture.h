/*
 * socket_fixture.h: the plain loopback TCP client the network tests drive
 * servers with: a free port (bind to port 0, read it back, close), a
 * blocking connect, and a send that writes everything (no SIGPIPE when the
 * server has closed).
 */
#ifndef PL_TESTS_SOCKET_FIXTURE_H
#define PL_TESTS_SOCKET_FIXTURE_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>
#include <unistd.h>

static __attribute__((unused)) int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    bind(fd, (struct sockaddr *)&a, sizeof(a));
    socklen_t len = sizeof(a);
    getsockname(fd, (struct sockaddr *)&a, &len);
    close(fd);
    return ntohs(a.sin_port);
}

/* A connected socket to 127.0.0.1:port, or -1. */
static __attribute__((unused)) int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends all of data; stops quietly when the peer is gone. */
static __attribute__((unused)) void send_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n <= 0)
            return;
        p += n;
        len -= (size_t)n;
    }
}

#endif
