package agent

import (
	"fmt"
	"net/http"
	"time"
)

// Code is an error's stable machine code. Each code has one HTTP status.
type Code string

// The error codes of the API.
const (
	// CodeBusy (409): another holder has the resource, or the wait ran
	// out while it was taken.
	CodeBusy Code = "busy"
	// CodeNotEnoughNodes (503): fewer than 2f+1 nodes answered.
	CodeNotEnoughNodes Code = "not_enough_nodes"
	// CodeRefused (403): the cluster refused, for a reason retrying will
	// not fix (the agent's identity is not authorised for the resource,
	// or not a client of the nodes at all: they drop its connections;
	// another cluster).
	CodeRefused Code = "refused"
	// CodeBadRequest (400): a malformed resource name, body, duration or
	// parameter.
	CodeBadRequest Code = "bad_request"
	// CodeNotFound (404): no such lock (or it ended more than
	// Config.KeepEnded ago), or no such endpoint.
	CodeNotFound Code = "not_found"
	// CodeUnauthorised (401): the bearer secret is missing or wrong.
	CodeUnauthorised Code = "unauthorised"
	// CodeForbidden (403): a browser request (it has an Origin header), or
	// a host name that is not loopback on an agent without a secret.
	CodeForbidden Code = "forbidden"
	// CodeMethodNotAllowed (405): the method does not apply to the URL.
	CodeMethodNotAllowed Code = "method_not_allowed"
	// CodeTooLarge (413): the request body exceeds Config.MaxBodyBytes.
	CodeTooLarge Code = "too_large"
	// CodeLimit (429): the agent holds Config.MaxLocks locks, or
	// Config.MaxWaiting requests wait in it.
	CodeLimit Code = "limit"
	// CodeShuttingDown (503): the agent is stopping.
	CodeShuttingDown Code = "shutting_down"
	// CodeInternal (500): anything else.
	CodeInternal Code = "internal"
)

// Status is the HTTP status of the code.
func (c Code) Status() int {
	switch c {
	case CodeBusy:
		return http.StatusConflict
	case CodeNotEnoughNodes, CodeShuttingDown:
		return http.StatusServiceUnavailable
	case CodeRefused, CodeForbidden:
		return http.StatusForbidden
	case CodeBadRequest:
		return http.StatusBadRequest
	case CodeNotFound:
		return http.StatusNotFound
	case CodeUnauthorised:
		return http.StatusUnauthorized
	case CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeLimit:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// apiError is the JSON of every error answer.
type apiError struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	// Holder, Session, Epoch and Left describe who holds a busy resource;
	// Session is the hash of the holder's session (16 hex digits), as the
	// nodes name it, never its session ID.
	Holder  string `json:"holder,omitempty"`
	Session string `json:"session,omitempty"`
	Epoch   uint64 `json:"epoch,omitempty"`
	Left    string `json:"left,omitempty"`
	// Nodes are the indices of the nodes that failed or refused.
	Nodes []int `json:"nodes,omitempty"`

	retryAfter time.Duration
}

func (e *apiError) Error() string { return string(e.Code) + ": " + e.Message }

func badRequest(format string, args ...any) *apiError {
	return &apiError{Code: CodeBadRequest, Message: fmt.Sprintf(format, args...)}
}

func errShuttingDown() *apiError {
	return &apiError{Code: CodeShuttingDown, Message: "the agent is shutting down"}
}
