/*
 * kafka_fixture.h: librdkafka's in-process mock cluster for tests (no Kafka
 * broker is packaged for Debian). It listens on real loopback TCP ports, so
 * any Kafka client (librdkafka, kafkajs, kcat) can use it. Shared by the C
 * tests and tests/tools/kafka_mock.c, which runs one for the interop tests.
 */
#ifndef PL_TESTS_KAFKA_FIXTURE_H
#define PL_TESTS_KAFKA_FIXTURE_H

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>

typedef struct kf_cluster {
    rd_kafka_t *rk; /* the handle the mock cluster lives in */
    rd_kafka_mock_cluster_t *mc;
    char bootstrap[256];
} kf_cluster;

/* Starts `brokers` mock brokers and creates `topics` (NULL-terminated) with
 * `partitions` partitions each (replication factor 1). 0, or -1. */
static __attribute__((unused)) int kf_start(kf_cluster *c, int brokers, const char *const *topics,
                                            int partitions)
{
    char why[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "3", why, sizeof(why));
    c->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof(why));
    if (!c->rk) {
        fprintf(stderr, "mock handle: %s\n", why);
        return -1;
    }
    c->mc = rd_kafka_mock_cluster_new(c->rk, brokers);
    if (!c->mc) {
        fprintf(stderr, "rd_kafka_mock_cluster_new failed\n");
        rd_kafka_destroy(c->rk);
        return -1;
    }
    for (size_t i = 0; topics && topics[i]; i++)
        if (rd_kafka_mock_topic_create(c->mc, topics[i], partitions, 1) != 0) {
            fprintf(stderr, "creating topic %s failed\n", topics[i]);
            return -1;
        }
    snprintf(c->bootstrap, sizeof(c->bootstrap), "%s", rd_kafka_mock_cluster_bootstraps(c->mc));
    return 0;
}

static __attribute__((unused)) void kf_stop(kf_cluster *c)
{
    if (c->mc)
        rd_kafka_mock_cluster_destroy(c->mc);
    if (c->rk)
        rd_kafka_destroy(c->rk);
    c->mc = NULL;
    c->rk = NULL;
}

#endif
