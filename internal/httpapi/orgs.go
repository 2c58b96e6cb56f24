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
	return route(log, withSession, http.StatusCreated, func(w http.ResponseWriter, r *http.Request, token string, req request) (any, error) {
		o, err := orgs.Create(r.Context(), token, req.Name)
		if err != nil {
			return nil, err
		}
		w.Header().Set("Location", "/v1/orgs/"+o.ID.String())
		return toOrganizationJSON(o), nil
	})
}

// handleListOrgs lists the bearer's organizations, by name.
func handleListOrgs(orgs Orgs, log *slog.Logger) http.HandlerFunc {
	type response struct {
		Organizations []organizationJSON `json:"organizations"`
	}
	return route(log, withSession, http.StatusOK, func(_ http.ResponseWriter, r *http.Request, token string, _ noBody) (any, error) {
		list, err := orgs.List(r.Context(), token)
		if err != nil {
			return nil, err
		}
		out := response{Organizations: make([]organizationJSON, 0, len(list))}
		for _, o := range list {
			out.Organizations = append(out.Organizations, toOrganizationJSON(o))
		}
		return out, nil
	})
}

// handleGetOrg shows an organization with its members to one of them;
// anyone else gets 404.
func handleGetOrg(orgs Orgs, log *slog.Logger) http.HandlerFunc {
	type response struct {
		organizationJSON
		Members []memberJSON `json:"members"`
	}
	return route(log, withSession, http.StatusOK, func(_ http.ResponseWriter, r *http.Request, token string, _ noBody) (any, error) {
		d, err := orgs.Get(r.Context(), token, pathID(r, "id"))
		if err != nil {
			return nil, err
		}
		out := response{organizationJSON: toOrganizationJSON(d.Organization), Members: make([]memberJSON, 0, len(d.Members))}
		for _, m := range d.Members {
			out.Members = append(out.Members, toMemberJSON(m))
		}
		return out, nil
	})
}

// handleInvite mails an invitation to an address: 202, whether or not the
// address has an account.
func handleInvite(orgs Orgs, log *slog.Logger) http.HandlerFunc {
	type request struct {
		Email string `json:"email"`
		Role  string `json:"role"`
	}
	return route(log, withSession, http.StatusAccepted, func(_ http.ResponseWriter, r *http.Request, token string, req request) (any, error) {
		return nil, orgs.Invite(r.Context(), token, pathID(r, "id"), req.Email, org.Role(req.Role))
	})
}

// handleInvitations lists an organization's pending invitations to one of
// its owners.
func handleInvitations(orgs Orgs, log *slog.Logger) http.HandlerFunc {
	type response struct {
		Invitations []invitationJSON `json:"invitations"`
	}
	return route(log, withSession, http.StatusOK, func(_ http.ResponseWriter, r *http.Request, token string, _ noBody) (any, error) {
		list, err := orgs.Invitations(r.Context(), token, pathID(r, "id"))
		if err != nil {
			return nil, err
		}
		out := response{Invitations: make([]invitationJSON, 0, len(list))}
		for _, i := range list {
			out.Invitations = append(out.Invitations, invitationJSON{
				ID: i.ID, Email: i.Email, Role: i.Role, InvitedBy: i.InvitedBy, SentAt: i.SentAt.UTC(), ExpiresAt: i.ExpiresAt.UTC(),
			})
		}
		return out, nil
	})
}

// handleRevoke revokes a pending invitation: 204, and its code stops
// working.
func handleRevoke(orgs Orgs, log *slog.Logger) http.HandlerFunc {
	return route(log, withSession, http.StatusNoContent, func(_ http.ResponseWriter, r *http.Request, token string, _ noBody) (any, error) {
		return nil, orgs.Revoke(r.Context(), token, pathID(r, "id"), pathID(r, "invitation_id"))
	})
}

// handleAccept uses an invitation's code with the bearer's session, whose
// address must be the invited one: 200 with the membership it made.
func handleAccept(orgs Orgs, log *slog.Logger) http.HandlerFunc {
	type response struct {
		Organization organizationJSON `json:"organization"`
		UserID       uuid.UUID        `json:"user_id"`
		JoinedAt     time.Time        `json:"joined_at"`
	}
	return route(log, withSession, http.StatusOK, func(_ http.ResponseWriter, r *http.Request, token string, req codeRequest) (any, error) {
		m, err := orgs.Accept(r.Context(), token, req.Code)
		if err != nil {
			return nil, err
		}
		return response{Organization: toOrganizationJSON(m.Organization), UserID: m.UserID, JoinedAt: m.JoinedAt.UTC()}, nil
	})
}

// handleOffer tells what an invitation's code offers, so that a client
// can show it before the person accepts: 200, and nothing is used up. It
// needs no session, as the page of the mailed link does not; the code
// comes in the body, never the URL, so that no access log holds it.
func handleOffer(orgs Orgs, log *slog.Logger) http.HandlerFunc {
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
	return route(log, withoutSession, http.StatusOK, func(_ http.ResponseWriter, r *http.Request, _ string, req codeRequest) (any, error) {
		o, err := orgs.Offer(r.Context(), req.Code)
		if err != nil {
			return nil, err
		}
		return response{Organization: organization{ID: o.OrgID, Name: o.OrgName}, Role: o.Role, Email: o.Email, ExpiresAt: o.ExpiresAt.UTC()}, nil
	})
}

// handleChangeRole changes a member's role: 200 with the member.
func handleChangeRole(orgs Orgs, log *slog.Logger) http.HandlerFunc {
	type request struct {
		Role string `json:"role"`
	}
	return route(log, withSession, http.StatusOK, func(_ http.ResponseWriter, r *http.Request, token string, req request) (any, error) {
		m, err := orgs.ChangeRole(r.Context(), token, pathID(r, "id"), pathID(r, "user_id"), org.Role(req.Role))
		if err != nil {
			return nil, err
		}
		return toMemberJSON(m), nil
	})
}

// handleRemoveMember removes a member (owners), or the bearer itself
// (leaving): 204. It ends nothing of the member's account.
func handleRemoveMember(orgs Orgs, log *slog.Logger) http.HandlerFunc {
	return route(log, withSession, http.StatusNoContent, func(_ http.ResponseWriter, r *http.Request, token string, _ noBody) (any, error) {
		return nil, orgs.RemoveMember(r.Context(), token, pathID(r, "id"), pathID(r, "user_id"))
	})
}

// handleDeleteOrg deletes an organization: 204; its members and pending
// invitations go.
func handleDeleteOrg(orgs Orgs, log *slog.Logger) http.HandlerFunc {
	return route(log, withSession, http.StatusNoContent, func(_ http.ResponseWriter, r *http.Request, token string, _ noBody) (any, error) {
		return nil, orgs.Delete(r.Context(), token, pathID(r, "id"))
	})
}
