package e2b

import (
	"net/http"

	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/httpjson"
)

// metrics answers an empty series: Paddock does not sample sandbox metrics yet (documented).
func (f *FrontDoor) metrics(w http.ResponseWriter, r *http.Request, ns string) {
	f.withClaim(w, r, ns, func(*extensionsv1beta1.SandboxClaim) { httpjson.Write(w, http.StatusOK, []e2bapi.SandboxDetail{}) })
}
