package relay

import (
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// timing is router middleware that keeps how long the handler took in the
// message's [MetadataDuration], for outbox.delivery.duration, which the
// relay records by the outcome it settles.
func timing(h message.HandlerFunc) message.HandlerFunc {
	return func(wm *message.Message) ([]*message.Message, error) {
		start := time.Now()
		out, err := h(wm)
		wm.Metadata.Set(MetadataDuration, strconv.FormatInt(int64(time.Since(start)), 10))
		return out, err
	}
}

// tookFrom returns the duration that timing kept in wm.
func tookFrom(wm *message.Message) time.Duration {
	n, _ := strconv.ParseInt(wm.Metadata.Get(MetadataDuration), 10, 64)
	return time.Duration(n)
}
