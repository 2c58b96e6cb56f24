package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/user"
)

// The pages of the organizations: the account page lists the account's
// organizations with a form to create one (POST /account/orgs);
// /orgs/{id} shows an organization to its members, with the forms of its
// owners and a way to leave; /invitations?code= is the page an
// invitation's link opens. They are forms over [Orgs], as the account's
// pages are over [Users], and are served only when [Deps.Orgs] is set.

// memberLine is one member on an organization's page; You marks the
// browser's own account.
type memberLine struct {
	org.Member
	You bool
}

// invitationCookie names and sets the cookie that keeps an invitation's
// code while the browser signs in: the page of an invitation's link,
// opened without a session, sets it, and the sign-in that follows goes
// back to that page ([site.afterSignIn]), so that the code survives the
// sign-in link's round trip through the mail. Under an https BASE_URL it
// is Secure and named with the __Host- prefix, as [sessionCookie] is.
type invitationCookie struct {
	name   string
	secure bool
}

// newInvitationCookie returns the invitation cookie of a service at
// baseURL.
func newInvitationCookie(baseURL *url.URL) invitationCookie {
	if baseURL != nil && baseURL.Scheme == "https" {
		return invitationCookie{name: "__Host-invitation", secure: true}
	}
	return invitationCookie{name: "invitation"}
}

// set keeps code until the invitation expires.
func (c invitationCookie) set(w http.ResponseWriter, code string, expires, now time.Time) {
	http.SetCookie(w, &http.Cookie{
		Name: c.name, Value: code, Path: "/",
		Expires: expires, MaxAge: max(int(expires.Sub(now)/time.Second), 1),
		HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteLaxMode,
	})
}

// clear forgets the code.
func (c invitationCookie) clear(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{
		Name: c.name, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteLaxMode,
	})
}

// code returns the code the browser keeps, or "".
func (c invitationCookie) code(r *http.Request) string {
	k, err := r.Cookie(c.name)
	if err != nil {
		return ""
	}
	return k.Value
}

// afterSignIn returns where a browser that has just signed in goes: back
// to the invitation that sent it to sign in, whose cookie it forgets, or
// to its account.
func (s *site) afterSignIn(w http.ResponseWriter, r *http.Request) string {
	code := s.invitation.code(r)
	if s.orgs == nil || code == "" {
		return "/account"
	}
	s.invitation.clear(w)
	return invitationPath(code)
}

// invitationPath is the page of the invitation whose code is code.
func invitationPath(code string) string {
	return "/invitations?" + url.Values{"code": {code}}.Encode()
}

// orgPath is the page of the organization id, with notice when it is not
// "".
func orgPath(id uuid.UUID, notice string) string {
	if notice == "" {
		return "/orgs/" + id.String()
	}
	return "/orgs/" + id.String() + "?notice=" + notice
}

// createOrg sends the account page's form of a new organization, whose
// first owner is the signed-in account, and goes to its page.
func (s *site) createOrg(w http.ResponseWriter, r *http.Request) {
	u, ok := s.signedIn(w, r, "")
	if !ok {
		return
	}
	name, err := form(w, r, "name")
	var o org.Organization
	if err == nil {
		o, err = s.orgs.Create(r.Context(), s.cookie.token(r), name)
	}
	if err != nil {
		d, perr := s.accountPage(r, u)
		if perr != nil {
			err = perr
		}
		d.OrgName, d.ErrorFor = name, "create"
		s.fail(w, r, err, "account", d, "")
		return
	}
	seeOther(w, orgPath(o.ID, "org-created"))
}

// orgPage fills the page of the organization id as u sees it.
func (s *site) orgPage(r *http.Request, u user.User, id uuid.UUID) (pageData, error) {
	token := s.cookie.token(r)
	o, err := s.orgs.Get(r.Context(), token, id)
	if err != nil {
		return pageData{}, fmt.Errorf("httpapi: organization page: %w", err)
	}
	d := pageData{Title: o.Name, User: u, Org: o.Organization, Owner: o.Role == org.RoleOwner, InviteRole: string(org.RoleMember)}
	for _, m := range o.Members {
		d.Members = append(d.Members, memberLine{Member: m, You: m.UserID == u.ID})
	}
	if d.Owner {
		if d.Invitations, err = s.orgs.Invitations(r.Context(), token, id); err != nil {
			return pageData{}, fmt.Errorf("httpapi: organization page: invitations: %w", err)
		}
	}
	return d, nil
}

// showOrg serves an organization's page to one of its members; to anyone
// else there is no such page.
func (s *site) showOrg(w http.ResponseWriter, r *http.Request) {
	q, err := query(r)
	if err != nil {
		s.fail(w, r, err, "", pageData{}, "/account")
		return
	}
	u, ok := s.signedIn(w, r, "")
	if !ok {
		return
	}
	d, err := s.orgPage(r, u, pathID(r, "id"))
	if err != nil {
		s.failOrg(w, r, err)
		return
	}
	d.Notice = notices[q.Get("notice")]
	s.render(w, r, http.StatusOK, "org", d)
}

// failOrg answers err of an organization's page that cannot be shown: an
// organization that is not there, or not the browser's, says so and leads
// to the account page, where the browser's organizations are.
func (s *site) failOrg(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, org.ErrNotFound) {
		s.render(w, r, http.StatusNotFound, "message", pageData{
			Title: "There is no such organization", Lead: "It does not exist, or you are not a member of it.",
			Next: "/account", NextLabel: "Go to your account",
		})
		return
	}
	s.fail(w, r, err, "", pageData{}, "/account")
}

// orgForm runs the form of an organization's page: it reads the form's
// fields, runs act with them and the browser's token, and sends the
// browser to the page that act returns. When act fails, the
// organization's page is shown again with what went wrong, and what again
// says of the form; when the page itself cannot be shown any more, that
// is said instead.
func (s *site) orgForm(w http.ResponseWriter, r *http.Request, fields []string,
	act func(u user.User, id uuid.UUID, token string, values map[string]string) (string, error),
	again func(d *pageData, values map[string]string, err error),
) {
	u, ok := s.signedIn(w, r, "")
	if !ok {
		return
	}
	id := pathID(r, "id")
	values := map[string]string{}
	_, err := form(w, r, "")
	for _, f := range fields {
		values[f] = r.PostForm.Get(f)
	}
	next := ""
	if err == nil {
		next, err = act(u, id, s.cookie.token(r), values)
	}
	if err == nil {
		seeOther(w, next)
		return
	}
	if errors.Is(err, user.ErrUnauthenticated) {
		s.sessionEnded(w)
		return
	}
	d, perr := s.orgPage(r, u, id)
	if perr != nil {
		s.failOrg(w, r, perr)
		return
	}
	if errors.Is(err, org.ErrNotFound) {
		d.Error = "That member or invitation is not in the organization any more. Nothing was changed."
	}
	if again != nil {
		again(&d, values, err)
	}
	s.fail(w, r, err, "org", d, "")
}

// formID returns the UUID of a form's field, or uuid.Nil, which names
// nothing, for a malformed one.
func formID(s string) uuid.UUID {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil
	}
	return id
}

// invite sends an owner's form of an invitation.
func (s *site) invite(w http.ResponseWriter, r *http.Request) {
	s.orgForm(w, r, []string{"email", "role"},
		func(_ user.User, id uuid.UUID, token string, v map[string]string) (string, error) {
			return orgPath(id, "invited"), s.orgs.Invite(r.Context(), token, id, v["email"], org.Role(v["role"]))
		},
		func(d *pageData, v map[string]string, _ error) {
			d.InviteEmail, d.InviteRole, d.ErrorFor = v["email"], v["role"], "invite"
		})
}

// revokeInvitation sends an owner's form that revokes a pending
// invitation.
func (s *site) revokeInvitation(w http.ResponseWriter, r *http.Request) {
	s.orgForm(w, r, []string{"invitation_id"},
		func(_ user.User, id uuid.UUID, token string, v map[string]string) (string, error) {
			return orgPath(id, "invitation-revoked"), s.orgs.Revoke(r.Context(), token, id, formID(v["invitation_id"]))
		}, nil)
}

// changeRole sends an owner's form of a member's role.
func (s *site) changeRole(w http.ResponseWriter, r *http.Request) {
	s.orgForm(w, r, []string{"user_id", "role"},
		func(_ user.User, id uuid.UUID, token string, v map[string]string) (string, error) {
			_, err := s.orgs.ChangeRole(r.Context(), token, id, formID(v["user_id"]), org.Role(v["role"]))
			return orgPath(id, "role-changed"), err
		}, nil)
}

// removeMember sends an owner's form that removes a member; removing
// oneself is leaving.
func (s *site) removeMember(w http.ResponseWriter, r *http.Request) {
	s.orgForm(w, r, []string{"user_id"},
		func(u user.User, id uuid.UUID, token string, v map[string]string) (string, error) {
			member := formID(v["user_id"])
			next := orgPath(id, "member-removed")
			if member == u.ID {
				next = "/account?notice=org-left"
			}
			return next, s.orgs.RemoveMember(r.Context(), token, id, member)
		}, nil)
}

// leaveOrg sends a member's form that leaves the organization.
func (s *site) leaveOrg(w http.ResponseWriter, r *http.Request) {
	s.orgForm(w, r, nil,
		func(u user.User, id uuid.UUID, token string, _ map[string]string) (string, error) {
			return "/account?notice=org-left", s.orgs.RemoveMember(r.Context(), token, id, u.ID)
		}, nil)
}

// errUnticked is an owner's deletion of an organization without its box
// ticked, which changes nothing.
var errUnticked = &decodeError{status: http.StatusBadRequest, typ: TypeBadRequest,
	detail: "tick the box to say that you mean to delete the organization"}

// deleteOrg sends an owner's form that deletes the organization, once its
// box says that the owner means it.
func (s *site) deleteOrg(w http.ResponseWriter, r *http.Request) {
	s.orgForm(w, r, []string{"confirm"},
		func(_ user.User, id uuid.UUID, token string, v map[string]string) (string, error) {
			if v["confirm"] != "yes" {
				return "", errUnticked
			}
			return "/account?notice=org-deleted", s.orgs.Delete(r.Context(), token, id)
		},
		func(d *pageData, _ map[string]string, err error) {
			d.ErrorFor = "delete"
			if errors.Is(err, errUnticked) {
				d.Error = "Tick the box to say that you mean to delete the organization."
			}
		})
}

// invitationPage fills the page of the invitation code: what it offers,
// and whom the browser is signed in as, if anyone. A session that has
// ended is no session.
func (s *site) invitationPage(r *http.Request, code string) (pageData, error) {
	d := pageData{Title: "Join an organization", Code: code, Next: "/account", NextLabel: "Go to your account"}
	if code != "" {
		offer, err := s.orgs.Offer(r.Context(), code)
		if err != nil {
			return d, fmt.Errorf("httpapi: invitation page: %w", err)
		}
		d.Offer = offer
	}
	if token := s.cookie.token(r); token != "" {
		u, err := s.users.Me(r.Context(), token)
		switch {
		case err == nil:
			d.SignedInAs = u.Email
		case !errors.Is(err, user.ErrUnauthenticated):
			return d, fmt.Errorf("httpapi: invitation page: %w", err)
		}
	}
	return d, nil
}

// showInvitation serves the page an invitation's link opens. It says
// what the code offers and for which address; with a session of that
// address its button accepts, with another address's it offers to sign
// out and come back here, and without one it leads to sign-in. Without a
// session the invitation cookie keeps the code, so that the next sign-in
// comes back here. It uses nothing up.
func (s *site) showInvitation(w http.ResponseWriter, r *http.Request) {
	q, err := query(r)
	if err != nil {
		s.fail(w, r, err, "", pageData{}, "/account")
		return
	}
	code := q.Get("code")
	d, err := s.invitationPage(r, code)
	if err != nil {
		s.fail(w, r, err, "invitation", d, "")
		return
	}
	if d.SignedInAs == "" && s.cookie.token(r) != "" {
		s.cookie.clear(w) // It names a session that has ended.
	}
	if code != "" && d.SignedInAs == "" {
		// The browser is to sign in as the invited address, and come
		// back here. A browser signed in as another address is not
		// brought back: it may be that address's owner's, who opened a
		// link not theirs, and would be sent here after every sign-in.
		s.invitation.set(w, code, d.Offer.ExpiresAt, s.now())
	}
	d.Notice = notices[q.Get("notice")]
	s.render(w, r, http.StatusOK, "invitation", d)
}

// acceptInvitation sends an invitation page's form: it accepts with the
// browser's session and goes to the organization's page. Without a
// session it goes back to the invitation's page, which leads to sign-in.
func (s *site) acceptInvitation(w http.ResponseWriter, r *http.Request) {
	code, err := form(w, r, "code")
	var m org.Membership
	if err == nil {
		m, err = s.orgs.Accept(r.Context(), s.cookie.token(r), code)
	}
	if errors.Is(err, user.ErrUnauthenticated) {
		if s.cookie.token(r) != "" {
			s.cookie.clear(w)
		}
		seeOther(w, invitationPath(code))
		return
	}
	if err != nil {
		d, perr := s.invitationPage(r, code)
		if perr != nil && !errors.Is(perr, org.ErrInvalidCode) {
			err = perr
		}
		d.Code = code
		if errors.Is(err, org.ErrAlreadyMember) {
			d.Error = "You are a member of this organization already."
		}
		s.fail(w, r, err, "invitation", d, "")
		return
	}
	s.invitation.clear(w)
	seeOther(w, orgPath(m.Organization.ID, "joined"))
}
