package node

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Prometheus view of PubSub.Counters, for whoever serves /metrics.
var (
	pubsubPublishedDesc  = prometheus.NewDesc("evalmesh_pubsub_published_total", "Messages this node published, by topic kind.", []string{"kind"}, nil)
	pubsubDeliveredDesc  = prometheus.NewDesc("evalmesh_pubsub_delivered_total", "Validated messages handed to this node's subscribers, by topic kind.", []string{"kind"}, nil)
	pubsubVerdictsDesc   = prometheus.NewDesc("evalmesh_pubsub_verdicts_total", "Topic validator answers, by kind, verdict and reason.", []string{"kind", "verdict", "reason"}, nil)
	pubsubRefusedDesc    = prometheus.NewDesc("evalmesh_pubsub_refused_total", "Messages gossipsub refused, by kind and library reason.", []string{"kind", "reason"}, nil)
	pubsubDroppedDesc    = prometheus.NewDesc("evalmesh_pubsub_dropped_total", "Messages lost for lack of queue room, by reason.", []string{"reason"}, nil)
	pubsubDuplicatesDesc = prometheus.NewDesc("evalmesh_pubsub_duplicates_total", "Copies of already-seen messages received (not a loss).", nil, nil)
	pubsubRepublishDesc  = prometheus.NewDesc("evalmesh_pubsub_republish_skipped_total", "Publishes of bytes this node published within the seen window, answered at once (not a loss).", nil, nil)
)

// Collector exposes the counters as Prometheus metrics (evalmesh_pubsub_*_total); register
// it with a registry.
func (p *PubSub) Collector() prometheus.Collector { return pubsubCollector{p} }

type pubsubCollector struct{ p *PubSub }

func (c pubsubCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{pubsubPublishedDesc, pubsubDeliveredDesc, pubsubVerdictsDesc, pubsubRefusedDesc, pubsubDroppedDesc, pubsubDuplicatesDesc, pubsubRepublishDesc} {
		ch <- d
	}
}

func (c pubsubCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.p.Counters()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for k, v := range s.Published {
		counter(pubsubPublishedDesc, v, k)
	}
	for k, v := range s.Delivered {
		counter(pubsubDeliveredDesc, v, k)
	}
	for k, v := range s.Verdicts {
		if parts := strings.SplitN(k, "/", 3); len(parts) == 3 {
			counter(pubsubVerdictsDesc, v, parts...)
		}
	}
	for k, v := range s.Refused {
		if kind, reason, ok := strings.Cut(k, "/"); ok {
			counter(pubsubRefusedDesc, v, kind, reason)
		}
	}
	for k, v := range s.Dropped {
		counter(pubsubDroppedDesc, v, k)
	}
	counter(pubsubDuplicatesDesc, s.Duplicates)
	counter(pubsubRepublishDesc, s.RepublishSkipped)
}
