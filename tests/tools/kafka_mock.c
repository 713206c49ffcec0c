/*
 * kafka_mock.c: runs librdkafka's mock Kafka cluster for the interop tests.
 *
 *   kafka_mock [-b BROKERS] [-p PARTITIONS] [TOPIC ...]
 *
 * Starts BROKERS (3) mock brokers on loopback ports, creates each TOPIC
 * with PARTITIONS (4) partitions, prints the bootstrap servers on one line
 * of stdout and serves until stdin is closed or the process is signalled.
 * The mock is in-memory and experimental (rdkafka_mock.h): it speaks the
 * Kafka protocol well enough for librdkafka and kafkajs, nothing is durable.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/kafka_fixture.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

int main(int argc, char **argv)
{
    int brokers = 3, partitions = 4, opt;
    while ((opt = getopt(argc, argv, "b:p:")) != -1) {
        if (opt == 'b')
            brokers = atoi(optarg);
        else if (opt == 'p')
            partitions = atoi(optarg);
        else {
            fprintf(stderr, "usage: kafka_mock [-b brokers] [-p partitions] [topic ...]\n");
            return 2;
        }
    }
    if (brokers < 1 || partitions < 1) {
        fprintf(stderr, "kafka_mock: brokers and partitions must be positive\n");
        return 2;
    }
    kf_cluster c = {0};
    const char **topics = calloc((size_t)(argc - optind + 1), sizeof(*topics));
    for (int i = optind; i < argc; i++)
        topics[i - optind] = argv[i];
    if (kf_start(&c, brokers, topics, partitions) != 0)
        return 1;
    printf("%s\n", c.bootstrap);
    fflush(stdout);
    /* no SA_RESTART: a signal interrupts the read below */
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* stdin closes when the test that started us goes away */
    char buf[64];
    while (!stop_requested) {
        ssize_t n = read(0, buf, sizeof(buf));
        if (n == 0 || (n < 0 && !stop_requested && errno != EINTR))
            break;
    }
    kf_stop(&c);
    free(topics);
    return 0;
}
