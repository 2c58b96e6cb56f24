package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/user"
)

// Orgs is what the API needs of the organizations domain; *org.Service
// has it. Every method but Offer takes the bearer's session token and
// answers user.ErrUnauthenticated for a token of no live session.
type Orgs interface {
	Create(ctx context.Context, token, name string) (org.Organization, error)
	List(ctx context.Context, token string) ([]org.Organization, error)
	Get(ctx context.Context, token string, id uuid.UUID) (org.Details, error)
	Invite(ctx context.Context, token string, id uuid.UUID, email string, role org.Role) error
	Invitations(ctx context.Context, token string, id uuid.UUID) ([]org.Invitation, error)
	Revoke(ctx context.Context, token string, id, invitation uuid.UUID) error
	Accept(ctx context.Context, token, code string) (org.Membership, error)
	// Offer tells what an invitation code offers, and uses nothing up,
	// for the page the mailed link opens and POST /v1/invitations/offer.
	Offer(ctx context.Context, code string) (org.InvitationOffer, error)
	ChangeRole(ctx context.Context, token string, id, member uuid.UUID, role org.Role) (org.Member, error)
	RemoveMember(ctx context.Context, token string, id, member uuid.UUID) error
	Delete(ctx context.Context, token string, id uuid.UUID) error
}

// orgFailureOf maps an error of the organizations domain to its answer,
// and reports false for any other error. An invalid address is the user
// domain's error, and an invalid code is answered as the user's is.
func orgFailureOf(err error) (failure, bool) {
	var tooMany *org.TooManyInvitationsError
	switch {
	case errors.As(err, &tooMany):
		return failure{status: http.StatusTooManyRequests, typ: TypeTooManyRequests,
			detail: "this organization sent too many invitations; retry after the time given", retryAfter: tooMany.RetryAfter}, true
	case errors.Is(err, org.ErrInvalidName):
		return failure{status: http.StatusBadRequest, typ: TypeInvalidName, detail: reason(err, org.ErrInvalidName)}, true
	case errors.Is(err, org.ErrInvalidRole):
		return failure{status: http.StatusBadRequest, typ: TypeInvalidRole, detail: reason(err, org.ErrInvalidRole)}, true
	case errors.Is(err, org.ErrInvalidCode):
		return failure{status: http.StatusBadRequest, typ: TypeInvalidCode}, true
	case errors.Is(err, org.ErrNotFound):
		return failure{status: http.StatusNotFound, typ: TypeNotFound,
			detail: "no organization of yours, or no member or pending invitation of it, has that ID"}, true
	case errors.Is(err, org.ErrNotOwner):
		return failure{status: http.StatusForbidden, typ: TypeNotOwner}, true
	case errors.Is(err, org.ErrWrongAddress):
		return failure{status: http.StatusForbidden, typ: TypeWrongAddress,
			detail: "sign in with the invited address to accept; the code still works"}, true
	case errors.Is(err, org.ErrAlreadyMember):
		return failure{status: http.StatusConflict, typ: TypeAlreadyMember}, true
	case errors.Is(err, org.ErrLastOwner):
		return failure{status: http.StatusConflict, typ: TypeLastOwner,
			detail: "make another member an owner first"}, true
	case errors.Is(err, org.ErrTooManyOrganizations):
		return failure{status: http.StatusConflict, typ: TypeTooManyOrganizations,
			detail: "an account may belong to at most " + strconv.Itoa(org.MaxOrganizations) + " organizations"}, true
	case errors.Is(err, org.ErrFull):
		return failure{status: http.StatusConflict, typ: TypeOrganizationFull,
			detail: "an organization may hold at most " + strconv.Itoa(org.MaxMembers) + " members"}, true
	}
	return failure{}, false
}

// reason returns what err says from sentinel on, the sentinel's own
// package prefix left out: "invalid name: longer than 100 characters",
// however often the error was wrapped around it.
func reason(err, sentinel error) string {
	msg, s := err.Error(), sentinel.Error()
	if i := strings.LastIndex(msg, s); i >= 0 {
		return publicDetail(msg[i:])
	}
	return publicDetail(s)
}

// pathID returns the UUID of r's path value name. A malformed one is
// uuid.Nil, which names no organization, member or invitation, so that
// the domain checks the token first for it too and then answers
// [org.ErrNotFound], as a well-formed ID of nothing.
func pathID(r *http.Request, name string) uuid.UUID {
	id, err := uuid.Parse(r.PathValue(name))
	if err != nil {
		return uuid.Nil
	}
	return id
}

// organizationJSON is an organization as one of its members sees it.
type organizationJSON struct {
	ID        uuid.UUID `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	Role      org.Role  `json:"role"`
}

func toOrganizationJSON(o org.Organization) organizationJSON {
	return organizationJSON{ID: o.ID, Name: o.Name, CreatedAt: o.CreatedAt.UTC(), Role: o.Role}
}

// memberJSON is a member of an organization.
type memberJSON struct {
	UserID   uuid.UUID `json:"user_id"`
	Email    string    `json:"email"`
	Role     org.Role  `json:"role"`
	JoinedAt time.Time `json:"joined_at"`
}

func toMemberJSON(m org.Member) memberJSON {
	return memberJSON{UserID: m.UserID, Email: m.Email, Role: m.Role, JoinedAt: m.JoinedAt.UTC()}
}

// invitationJSON is a pending invitation, as an owner sees it.
type invitationJSON struct {
	ID        uuid.UUID `json:"id"`
	Email     string    `json:"email"`
	Role      org.Role  `json:"role"`
	InvitedBy uuid.UUID `json:"invited_by"`
	SentAt    time.Time `json:"sent_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// handleCreateOrg creates an organization whose first owner is the
// bearer: 201 with it, and its address in Location.
func handleCreateOrg(orgs Orgs, log *slog.Logger) http.HandlerFunc {
	type request struct {
		Name string `json:"name"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		token := bearer(r)
		if token == "" {
			writeError(w, r, log, user.ErrUnauthenticated, 0)
			return
		}
		var req request
		if err := decode(w, r, &req); err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		o, err := orgs.Create(r.Context(), token, req.Name)
		if err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		w.Header().Set("Location", "/v1/orgs/"+o.ID.String())
		writeJSON(w, http.StatusCreated, toOrganizationJSON(o))
	}
}

// handleListOrgs lists the bearer's organizations, by name.
func handleListOrgs(orgs Orgs, log *slog.Logger) http.HandlerFunc {
	type response struct {
		Organizations []organizationJSON `json:"organizations"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		list, err := orgs.List(r.Context(), bearer(r))
		if err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		out := response{Organizations: make([]organizationJSON, 0, len(list))}
		for _, o := range list {
			out.Organizations = append(out.Organizations, toOrganizationJSON(o))
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// handleGetOrg shows an organization with its members to one of them;
// anyone else gets 404.
func handleGetOrg(orgs Orgs, log *slog.Logger) http.HandlerFunc {
	type response struct {
		organizationJSON
		Members []memberJSON `json:"members"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		d, err := orgs.Get(r.Context(), bearer(r), pathID(r, "id"))
		if err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		out := response{organizationJSON: toOrganizationJSON(d.Organization), Members: make([]memberJSON, 0, len(d.Members))}
		for _, m := range d.Members {
			out.Members = append(out.Members, toMemberJSON(m))
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// handleInvite mails an invitation to an address: 202, whether or not the
// address has an account.
func handleInvite(orgs Orgs, log *slog.Logger) http.HandlerFunc {
	type request struct {
		Email string `json:"email"`
		Role  string `json:"role"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		token := bearer(r)
		if token == "" {
			writeError(w, r, log, user.ErrUnauthenticated, 0)
			return
		}
		var req request
		if err := decode(w, r, &req); err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		if err := orgs.Invite(r.Context(), token, pathID(r, "id"), req.Email, org.Role(req.Role)); err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}
}

// handleInvitations lists an organization's pending invitations to one of
// its owners.
func handleInvitations(orgs Orgs, log *slog.Logger) http.HandlerFunc {
	type response struct {
		Invitations []invitationJSON `json:"invitations"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		list, err := orgs.Invitations(r.Context(), bearer(r), pathID(r, "id"))
		if err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		out := response{Invitations: make([]invitationJSON, 0, len(list))}
		for _, i := range list {
			out.Invitations = append(out.Invitations, invitationJSON{
				ID: i.ID, Email: i.Email, Role: i.Role, InvitedBy: i.InvitedBy, SentAt: i.SentAt.UTC(), ExpiresAt: i.ExpiresAt.UTC(),
			})
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// handleRevoke revokes a pending invitation: 204, and its code stops
// working.
func handleRevoke(orgs Orgs, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := orgs.Revoke(r.Context(), bearer(r), pathID(r, "id"), pathID(r, "invitation_id")); err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// handleAccept uses an invitation's code with the bearer's session, whose
// address must be the invited one: 200 with the membership it made.
func handleAccept(orgs Orgs, log *slog.Logger) http.HandlerFunc {
	type request struct {
		Code string `json:"code"`
	}
	type response struct {
		Organization organizationJSON `json:"organization"`
		UserID       uuid.UUID        `json:"user_id"`
		JoinedAt     time.Time        `json:"joined_at"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		token := bearer(r)
		if token == "" {
			writeError(w, r, log, user.ErrUnauthenticated, 0)
			return
		}
		var req request
		if err := decode(w, r, &req); err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		m, err := orgs.Accept(r.Context(), token, req.Code)
		if err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		writeJSON(w, http.StatusOK, response{Organization: toOrganizationJSON(m.Organization), UserID: m.UserID, JoinedAt: m.JoinedAt.UTC()})
	}
}

// handleOffer tells what an invitation's code offers, so that a client
// can show it before the person accepts: 200, and nothing is used up. It
// needs no session, as the page of the mailed link does not; the code
// comes in the body, never the URL, so that no access log holds it.
func handleOffer(orgs Orgs, log *slog.Logger) http.HandlerFunc {
	type request struct {
		Code string `json:"code"`
	}
	type organization struct {
		ID   uuid.UUID `json:"id"`
		Name string    `json:"name"`
	}
	type response struct {
		Organization organization `json:"organization"`
		Role         org.Role     `json:"role"`
		Email        string       `json:"email"`
		ExpiresAt    time.Time    `json:"expires_at"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var req request
		if err := decode(w, r, &req); err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		o, err := orgs.Offer(r.Context(), req.Code)
		if err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		writeJSON(w, http.StatusOK, response{
			Organization: organization{ID: o.OrgID, Name: o.OrgName}, Role: o.Role, Email: o.Email, ExpiresAt: o.ExpiresAt.UTC(),
		})
	}
}

// handleChangeRole changes a member's role: 200 with the member.
func handleChangeRole(orgs Orgs, log *slog.Logger) http.HandlerFunc {
	type request struct {
		Role string `json:"role"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		token := bearer(r)
		if token == "" {
			writeError(w, r, log, user.ErrUnauthenticated, 0)
			return
		}
		var req request
		if err := decode(w, r, &req); err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		m, err := orgs.ChangeRole(r.Context(), token, pathID(r, "id"), pathID(r, "user_id"), org.Role(req.Role))
		if err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		writeJSON(w, http.StatusOK, toMemberJSON(m))
	}
}

// handleRemoveMember removes a member (owners), or the bearer itself
// (leaving): 204. It ends nothing of the member's account.
func handleRemoveMember(orgs Orgs, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := orgs.RemoveMember(r.Context(), bearer(r), pathID(r, "id"), pathID(r, "user_id")); err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// handleDeleteOrg deletes an organization: 204; its members and pending
// invitations go.
func handleDeleteOrg(orgs Orgs, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := orgs.Delete(r.Context(), bearer(r), pathID(r, "id")); err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}
