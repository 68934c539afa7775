package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/emptypb"

	processv1 "github.com/paddock-dev/paddock/api/proto/process/v1"
	"github.com/paddock-dev/paddock/internal/sandboxd/process"
)

// The HTTP form of ProcessService.Start, WriteStdin and SendSignal. gRPC needs HTTP/2 end to
// end, which the router (HTTP/1.1 to upstreams, like the upstream router) cannot carry; these
// endpoints let a streaming exec go through it. Bodies and events are the proto messages in
// their JSON form, so both transports speak one schema.
//
//	POST /v1/processes                      StartRequest  -> application/x-ndjson StartResponse per line
//	POST /v1/processes/{id}/stdin[?eof=true] raw bytes    -> 204
//	POST /v1/processes/{id}/signal?signal=SIGNAL_SIGTERM  -> 204

// ndjson is the content type of the event stream.
const ndjson = "application/x-ndjson"

func (d *Daemon) registerProcessRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/processes", d.startProcess)
	mux.HandleFunc("POST /v1/processes/{id}/stdin", d.writeProcessStdin)
	mux.HandleFunc("POST /v1/processes/{id}/signal", d.signalProcess)
}

func (d *Daemon) startProcess(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidArgument, fmt.Sprintf("reading the request body: %v", err))
		return
	}
	req := &processv1.StartRequest{}
	if err := protojson.Unmarshal(body, req); err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidArgument,
			fmt.Sprintf(`body is not a StartRequest in JSON: %v; send {"config":{"command":["/bin/sh","-c","..."]}}`, err))
		return
	}
	rc := http.NewResponseController(w)
	started := false
	send := func(ev *processv1.StartResponse) error {
		line, err := protojson.Marshal(ev)
		if err != nil {
			return err
		}
		if !started {
			started = true
			w.Header().Set("Content-Type", ndjson)
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusOK)
		}
		if _, err := w.Write(append(line, '\n')); err != nil {
			return err
		}
		// Each event leaves at once; the client sees output while the process runs.
		return rc.Flush()
	}
	err = d.start(r.Context(), req, send)
	if err != nil && !started {
		writeStatusError(w, err)
	}
	// After the first event the status is sent; a stream without an exit event tells the
	// client the process did not finish normally.
}

func (d *Daemon) writeProcessStdin(w http.ResponseWriter, r *http.Request) {
	id, ok := processID(w, r)
	if !ok {
		return
	}
	eof, err := optionalBool(r, "eof")
	if err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidArgument, err.Error())
		return
	}
	svc := &processService{d: d}
	if _, err := svc.lookup(id); err != nil {
		writeStatusError(w, err)
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidArgument, fmt.Sprintf("reading stdin data: %v; send at most %d bytes per call", err, maxJSONBody))
		return
	}
	if len(data) > 0 {
		req := &processv1.WriteStdinRequest{ProcessId: id, Payload: &processv1.WriteStdinRequest_Input{Input: data}}
		if _, err := svc.WriteStdin(r.Context(), req); err != nil {
			writeStatusError(w, err)
			return
		}
	}
	if eof {
		req := &processv1.WriteStdinRequest{ProcessId: id, Payload: &processv1.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}}
		// The process existed at the lookup above; if it has exited since, for instance on the
		// data just written, there is no input left to close and the call has done its job.
		if _, err := svc.WriteStdin(r.Context(), req); err != nil && status.Code(err) != codes.NotFound {
			writeStatusError(w, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (d *Daemon) signalProcess(w http.ResponseWriter, r *http.Request) {
	id, ok := processID(w, r)
	if !ok {
		return
	}
	name := r.URL.Query().Get("signal")
	sig, known := processv1.Signal_value[name]
	if !known {
		writeError(w, http.StatusBadRequest, codeInvalidArgument,
			fmt.Sprintf("query parameter signal=%q is not a signal; use SIGNAL_SIGINT, SIGNAL_SIGTERM or SIGNAL_SIGKILL", name))
		return
	}
	svc := &processService{d: d}
	if _, err := svc.SendSignal(r.Context(), &processv1.SendSignalRequest{ProcessId: id, Signal: processv1.Signal(sig)}); err != nil {
		writeStatusError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func processID(w http.ResponseWriter, r *http.Request) (int32, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 32)
	if err != nil || id <= 0 {
		writeError(w, http.StatusBadRequest, codeInvalidArgument,
			fmt.Sprintf("process id %q is not a positive integer; use the process_id of the stream's init event", r.PathValue("id")))
		return 0, false
	}
	return int32(id), true
}

func optionalBool(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("query parameter %s=%q is not a boolean; use true or false", name, v)
	}
	return b, nil
}

// httpStatusOf maps the gRPC codes ProcessService returns to REST statuses and error codes.
var httpStatusOf = map[codes.Code]struct {
	status int
	code   string
}{
	codes.InvalidArgument:    {http.StatusBadRequest, codeInvalidArgument},
	codes.NotFound:           {http.StatusNotFound, codeNotFound},
	codes.PermissionDenied:   {http.StatusForbidden, codePermissionDenied},
	codes.FailedPrecondition: {http.StatusConflict, codeConflict},
	codes.ResourceExhausted:  {http.StatusRequestEntityTooLarge, codeResourceExhausted},
	codes.Unavailable:        {http.StatusServiceUnavailable, codeUnavailable},
	codes.Unauthenticated:    {http.StatusUnauthorized, codeUnauthenticated},
}

func writeStatusError(w http.ResponseWriter, err error) {
	var tooMany *process.TooManyProcessesError
	if errors.As(err, &tooMany) {
		writeError(w, http.StatusTooManyRequests, codeResourceExhausted, tooMany.Error())
		return
	}
	st, _ := status.FromError(err)
	m, ok := httpStatusOf[st.Code()]
	if !ok {
		m.status, m.code = http.StatusInternalServerError, codeInternal
	}
	writeError(w, m.status, m.code, st.Message())
}
