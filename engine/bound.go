package engine

import (
	"github.com/conchsh/conch/apitype"
	"github.com/conchsh/conch/internal/term/render"
)

// resultSlack is how many code points a result's text may have beyond the
// agent's maxOutputChars: room for the inline events (eventsMax) and for
// the markers, the state line and the hints that the actions add to their
// capped output (docs/tools.md).
const resultSlack = 2000

// quoteMax is the most code points of one quoted line (a matched line, an
// echoed pattern) in a result.
const quoteMax = 500

// resultLimit is the bound of every result text for agent.
func (e *Engine) resultLimit(agent string) int {
	return e.conf().Exec(agent).MaxOutputChars + resultSlack
}

// bound is the last guard of a result's size, applied to every result
// handed to a caller (Call, AwaitApproved): a text over resultLimit is cut
// in the middle by render.Bound, and so is the message of an error, which
// may echo the caller's input. The actions shape their own output to fit
// (log pages, search and list stop at the budget and say how to go on),
// so this only acts on a result that no action bounded.
func (e *Engine) bound(agent string, r apitype.Result) apitype.Result {
	limit := e.resultLimit(agent)
	r.Text, _ = render.Bound(r.Text, limit)
	if d, ok := r.Details.(*apitype.ErrorDetails); ok && d.Error != nil {
		if msg, cut := render.Bound(d.Error.Message, limit); cut {
			c, ce := *d, *d.Error
			ce.Message = msg
			c.Error = &ce
			r.Details = &c
		}
	}
	return r
}
