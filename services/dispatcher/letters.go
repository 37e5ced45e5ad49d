package dispatcher

import "github.com/msgmesh/msgmesh/platform/webhookstore"

// letter is one message on its way through a webhook; its record format
// is the webhook store's (retry and dead-letter records).
type letter = webhookstore.Letter
