package httpapi

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/user"
)

// The browser pages: / asks for a sign-in link, /sign-in and
// /confirm-email are the pages the mailed links open, and /account shows
// the signed-in person their address, its change, their recent activity and
// a way to sign out; the organizations' pages are in orgpages.go. They are
// plain HTML forms that work without JavaScript; pages.js only keeps a
// form from being sent twice.
//
// Opening a page changes nothing: a GET never uses a code up, so a mail
// scanner that follows every link is harmless. The person presses a button,
// which POSTs the form.
//
// A sign-in through the pages sets a session cookie that holds the same
// session token the API hands out ([sessionCookie]); only the pages read it,
// and the API takes bearer tokens alone, so no API request is ever
// authenticated by a cookie. Every POST of the pages is refused when it
// comes from another site (http.CrossOriginProtection): the account's forms
// are what the cookie authenticates, and a forged sign-in would put the
// victim into the forger's account.

//go:embed pages
var pageFiles embed.FS

// pages are the page templates by name, each with the layout.
var pages = func() map[string]*template.Template {
	funcs := template.FuncMap{"address": address}
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(pageFiles, "pages/layout.html"))
	m := map[string]*template.Template{}
	for _, name := range []string{"home", "sent", "code", "account", "message", "org", "invitation"} {
		m[name] = template.Must(template.Must(layout.Clone()).ParseFS(pageFiles, "pages/"+name+".html"))
	}
	return m
}()

// address shows an email address so that a narrow screen breaks it where
// a reader expects a break, after the @ or before a dot (<wbr>), and not
// inside a word; the style sheet breaks a part too long for a line.
func address(email string) template.HTML {
	var b strings.Builder
	for _, r := range email {
		if r == '.' && b.Len() > 0 {
			b.WriteString("<wbr>")
		}
		b.WriteString(template.HTMLEscapeString(string(r)))
		if r == '@' {
			b.WriteString("<wbr>")
		}
	}
	return template.HTML(b.String())
}

// notices are the notices the pages show after a redirect, by the key in
// ?notice=; the key is all a URL carries, so no one can put words on a page
// through a link.
var notices = map[string]string{
	"email-sent":              "We sent a confirmation link to your new address. Your address changes when you open it.",
	"email-changed":           "Your email address has been changed.",
	"signed-out":              "You have signed out.",
	"session-ended-elsewhere": "That session has ended.",
	"sessions-ended":          "Every other session has ended.",
	"email-restored":          "The change of address is undone, and every session of the account has ended. Sign in again with your address.",
	"session-ended":           "Your session has ended. Sign in again to go on.",
	"deleted":                 "Your account is deleted, and everything we held of it erased. You can sign up again with the same address, as a new account.",
	"org-created":             "The organization is created, and you are its owner.",
	"invited":                 "The invitation is on its way.",
	"invitation-revoked":      "The invitation is revoked; its link no longer works.",
	"role-changed":            "The role is changed.",
	"member-removed":          "The member is removed from the organization.",
	"org-left":                "You have left the organization.",
	"org-deleted":             "The organization is deleted.",
	"joined":                  "You have joined the organization.",
}

// maxFormBytes bounds the body of a page's form.
const maxFormBytes = 4 << 10

// pageData is what the templates show.
type pageData struct {
	Title  string
	Notice string
	Error  string
	// Invalid says that Error is about the code, which is unknown, used or
	// expired, so the page shows where to get a new one (Next).
	Invalid bool

	// Email is the address of the sign-in form.
	Email string

	// Lead, Action, Code, Button and Busy fill the page of a code.
	Lead, Action, Code, Button, Busy string
	// SignInAs names the account a sign-in code signs into, ChangeFrom and
	// ChangeTo the change a confirmation code makes, and SignedInAs whom
	// the browser is signed in as already.
	SignInAs, ChangeFrom, ChangeTo, SignedInAs string
	// UndoTo is the address an undo code moves its account back to.
	UndoTo string

	// User, NewEmail and the activity fill the account page.
	User          user.User
	NewEmail      string
	DeleteRefused bool // Error is about the deletion's box, not the address.
	ActivityShown bool
	Activity      []activityLine
	Behind        int64
	Sessions      []user.SessionInfo

	// ErrorFor names the form of the organizations' that Error is about:
	// "create" (the account page's), "invite" or "delete"; "" for none.
	ErrorFor string
	// OrgsShown says that the account page lists the account's
	// organizations, Orgs, with a form to create one named OrgName.
	OrgsShown bool
	Orgs      []org.Organization
	OrgName   string

	// Org, Members and Owner fill an organization's page, and for its
	// owners Invitations and the invitation's form, InviteEmail and
	// InviteRole.
	Org                     org.Organization
	Members                 []memberLine
	Owner                   bool
	Invitations             []org.Invitation
	InviteEmail, InviteRole string

	// Offer is what the code of an invitation's page offers.
	Offer org.InvitationOffer

	// Next and NextLabel are the way on from a message page, or from a
	// code that no longer works.
	Next, NextLabel string
}

// activityLine is one item of the account page's activity.
type activityLine struct {
	What string
	At   time.Time
}

// describeActivity says in words what an item of activity records.
func describeActivity(a user.Activity) string {
	switch a.Type {
	case user.ActivityRegistered:
		return "Account created"
	case user.ActivitySignedIn:
		return "Signed in"
	case user.ActivitySignedOut:
		return "Signed out"
	case user.ActivityEmailChangeRequested:
		return "Asked to change the address"
	case user.ActivityEmailChanged:
		return "Address changed to " + a.Detail
	case user.ActivityEmailChangeUndone:
		return "Change of address undone; the address is " + a.Detail + " again"
	case user.ActivitySessionEnded:
		switch a.Detail {
		case user.EndedByOwner:
			return "A session was ended from another"
		case user.EndedByEmailChange:
			return "A session was ended by the change of address"
		case user.EndedByUndo:
			return "A session was ended by undoing a change of address"
		}
		return "A session was ended"
	case org.ActivityCreated, org.ActivityJoined, org.ActivityRoleChanged, org.ActivityLeft, org.ActivityRemoved, org.ActivityDeleted:
		return describeOrgActivity(a)
	default:
		return a.Type
	}
}

// describeOrgActivity says in words what an item of an organization's
// activity records, naming the organization as it was named then.
func describeOrgActivity(a user.Activity) string {
	d, err := org.ParseActivityDetail(a.Type, a.Detail)
	the := "the organization " + d.Name
	if err != nil {
		the = "an organization"
	}
	role := "a member"
	if d.Role == org.RoleOwner {
		role = "an owner"
	}
	switch a.Type {
	case org.ActivityCreated:
		return "Created " + the
	case org.ActivityJoined:
		return "Joined " + the + " as " + role
	case org.ActivityRoleChanged:
		if err != nil {
			return "Role changed in an organization"
		}
		if d.Role == org.RoleMember {
			return "No longer an owner of " + the
		}
		return "Made an owner of " + the
	case org.ActivityLeft:
		return "Left " + the
	case org.ActivityRemoved:
		return "Removed from " + the + " by an owner"
	default:
		return strings.ToUpper(the[:1]) + the[1:] + " was deleted"
	}
}

// recentActivity is how many items the account page shows.
const recentActivity = 10

// site serves the pages.
type site struct {
	users    Users
	activity ActivityReader
	// orgs is nil when the service serves no organizations.
	orgs       Orgs
	log        *slog.Logger
	cookie     sessionCookie
	invitation invitationCookie
	now        func() time.Time
}

// sessionCookie names and sets the cookie of a signed-in browser. Under an
// https BASE_URL it is Secure and named with the __Host- prefix, which
// browsers keep to a cookie set by this origin alone, over https, for every
// path; under http (trying it on localhost) it is plain "session".
type sessionCookie struct {
	name   string
	secure bool
}

// newSessionCookie returns the session cookie of a service at baseURL.
func newSessionCookie(baseURL *url.URL) sessionCookie {
	if baseURL != nil && baseURL.Scheme == "https" {
		return sessionCookie{name: "__Host-session", secure: true}
	}
	return sessionCookie{name: "session"}
}

// set starts the browser's session s.
func (c sessionCookie) set(w http.ResponseWriter, s user.Session, now time.Time) {
	http.SetCookie(w, &http.Cookie{
		Name: c.name, Value: s.Token, Path: "/",
		Expires: s.ExpiresAt, MaxAge: max(int(s.ExpiresAt.Sub(now)/time.Second), 1),
		HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteLaxMode,
	})
}

// clear ends the browser's session.
func (c sessionCookie) clear(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{
		Name: c.name, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteLaxMode,
	})
}

// token returns the session token the browser sent, or "".
func (c sessionCookie) token(r *http.Request) string {
	k, err := r.Cookie(c.name)
	if err != nil {
		return ""
	}
	return k.Value
}

// render writes the page name with status.
func (s *site) render(w http.ResponseWriter, r *http.Request, status int, name string, d pageData) {
	var buf bytes.Buffer
	if err := pages[name].ExecuteTemplate(&buf, "layout", d); err != nil {
		s.log.ErrorContext(r.Context(), "page failed", "page", name, "error", err)
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString("<!doctype html>\n<title>Error · Accounts</title>\n<p>" + pageMessages[TypeInternal] + "</p>\n")
	}
	pageHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// pageMessages are what the pages say of a problem, where the problem's
// title is not meant for a person at a browser.
var pageMessages = map[string]string{
	TypeInvalidCode:          "This link is unknown, used or expired.",
	TypeTooManyRequests:      "Too many requests. Wait a little, then try again.",
	TypeBusy:                 "The service is busy. Nothing was changed; try again shortly.",
	TypeUnavailable:          "The service is unavailable. Nothing was changed; try again shortly.",
	TypeInternal:             "Something went wrong on our side. Try again.",
	TypeUnsupportedMediaType: "A form must be sent as application/x-www-form-urlencoded.",
}

// fail answers err. A form is shown again (again, page name) with what went
// wrong said above it, unless again says it already, so that what was
// typed is kept and pressing the button again sends it again; with name ""
// a page of its own says what went wrong and leads to next. A session that
// ended meanwhile sends the browser to the sign-in page.
func (s *site) fail(w http.ResponseWriter, r *http.Request, err error, name string, again pageData, next string) {
	if errors.Is(err, user.ErrUnauthenticated) {
		s.sessionEnded(w)
		return
	}
	f, ok := failureOf(r, s.log, err, http.StatusBadRequest)
	if !ok {
		return
	}
	f.setHeaders(w)
	message, ok := pageMessages[f.typ]
	if !ok {
		message = titles[f.typ]
	}
	if name == "" {
		s.render(w, r, f.status, "message", pageData{Title: message, Next: next, NextLabel: "Try again"})
		return
	}
	if again.Error == "" {
		again.Error = message
	}
	again.Invalid = f.typ == TypeInvalidCode
	s.render(w, r, f.status, name, again)
}

// sessionEnded clears the browser's cookie and sends it to sign in again.
func (s *site) sessionEnded(w http.ResponseWriter) {
	s.cookie.clear(w)
	seeOther(w, "/?notice=session-ended")
}

// form reads the field of a POSTed form.
func form(w http.ResponseWriter, r *http.Request, field string) (string, error) {
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/x-www-form-urlencoded" {
		return "", &decodeError{status: http.StatusUnsupportedMediaType, typ: TypeUnsupportedMediaType,
			detail: pageMessages[TypeUnsupportedMediaType]}
	}
	if err := declaredTooLarge(w, r, maxFormBytes); err != nil {
		return "", err
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return "", decodeFailure(err)
		}
		return "", &decodeError{status: http.StatusBadRequest, typ: TypeBadRequest, detail: "the form cannot be read"}
	}
	return r.PostForm.Get(field), nil
}

// seeOther sends the browser on to path, one of the pages, with a GET.
func seeOther(w http.ResponseWriter, path string) {
	pageHeaders(w)
	w.Header().Set("Location", path)
	w.WriteHeader(http.StatusSeeOther)
}

// showHome serves the start page, which asks for a sign-in link.
func (s *site) showHome() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q, err := query(r)
		if err != nil {
			s.fail(w, r, err, "", pageData{}, "/")
			return
		}
		s.render(w, r, http.StatusOK, "home", pageData{Title: "Sign in", Notice: notices[q.Get("notice")]})
	}
}

// askLink sends the start page's form: a sign-in link to the address.
func (s *site) askLink(w http.ResponseWriter, r *http.Request) {
	email, err := form(w, r, "email")
	again := pageData{Title: "Sign in", Email: email}
	if err == nil {
		err = s.users.RequestSignInLink(r.Context(), email)
	}
	if err != nil {
		s.fail(w, r, err, "home", again, "")
		return
	}
	s.render(w, r, http.StatusOK, "sent", pageData{Title: "Check your inbox", Email: email})
}

// codePage describes the page of a mailed link: what it says and does, and
// where to get a new link when its code no longer works.
type codePage struct {
	title, lead, button, busy string
	next, nextLabel           string
	// preview fills in what the code would do, using nothing up.
	preview func(s *site, r *http.Request, code string, d *pageData) error
}

// The pages of the two mailed links.
var (
	signInPage = codePage{
		title: "Sign in", lead: "Press the button to sign in.",
		button: "Sign in", busy: "Signing in…",
		next: "/", nextLabel: "Ask for a new sign-in link",
		preview: func(s *site, r *http.Request, code string, d *pageData) error {
			email, err := s.users.SignInAddress(r.Context(), code)
			d.SignInAs = email
			return err
		},
	}
	confirmPage = codePage{
		title: "Confirm your new address", lead: "Press the button to make the change.",
		button: "Confirm", busy: "Confirming…",
		next: "/account", nextLabel: "Ask for a new confirmation link on your account page",
		preview: func(s *site, r *http.Request, code string, d *pageData) error {
			from, to, err := s.users.EmailChangeOf(r.Context(), code)
			d.ChangeFrom, d.ChangeTo = from, to
			return err
		},
	}
	undoPage = codePage{
		title: "Undo the change of address", lead: "Press the button to move the account back to this address. Every session of the account ends, and you sign in again.",
		button: "Undo the change", busy: "Undoing…",
		next: "/", nextLabel: "Go to the start",
		preview: func(s *site, r *http.Request, code string, d *pageData) error {
			to, err := s.users.UndoEmailAddress(r.Context(), code)
			d.UndoTo = to
			return err
		},
	}
)

// data returns the page with code in its form.
func (p codePage) data(r *http.Request, code string) pageData {
	return pageData{Title: p.title, Lead: p.lead, Action: r.URL.Path, Code: code, Button: p.button, Busy: p.busy,
		Next: p.next, NextLabel: p.nextLabel}
}

// showCode serves the page of a mailed link with the code from the link
// filled in. It says what pressing the button would do (which account it
// signs into, which address it changes) and whom the browser is signed in
// as already, so that a link someone else sent cannot sign a person into
// an account that is not theirs unawares; it uses nothing up.
func (s *site) showCode(p codePage) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q, err := query(r)
		if err != nil {
			s.fail(w, r, err, "", pageData{}, p.next)
			return
		}
		code := q.Get("code")
		d := p.data(r, code)
		if code != "" {
			if err := p.preview(s, r, code, &d); err != nil {
				s.fail(w, r, err, "code", d, "")
				return
			}
		}
		if token := s.cookie.token(r); token != "" && d.SignInAs != "" {
			if u, err := s.users.Me(r.Context(), token); err == nil {
				d.SignedInAs = u.Email
			}
		}
		s.render(w, r, http.StatusOK, "code", d)
	}
}

// signIn sends a sign-in page's form: it uses the code, sets the session
// cookie and goes to the account, or back to the invitation that sent the
// browser to sign in ([site.afterSignIn]).
func (s *site) signIn(w http.ResponseWriter, r *http.Request) {
	code, err := form(w, r, "code")
	var session user.Session
	if err == nil {
		session, err = s.users.SignIn(withClient(r), code)
	}
	if err != nil {
		s.fail(w, r, err, "code", signInPage.data(r, code), "")
		return
	}
	s.cookie.set(w, session, s.now())
	seeOther(w, s.afterSignIn(w, r))
}

// confirmEmail sends a confirmation page's form: it uses the code, which
// changes the address.
func (s *site) confirmEmail(w http.ResponseWriter, r *http.Request) {
	code, err := form(w, r, "code")
	if err == nil {
		// The browser's session, if it is one of the account, stays.
		_, err = s.users.ConfirmEmailChange(r.Context(), code, s.cookie.token(r))
	}
	if err != nil {
		s.fail(w, r, err, "code", confirmPage.data(r, code), "")
		return
	}
	seeOther(w, "/account?notice=email-changed")
}

// undoEmail sends an undo page's form: it uses the code, which moves the
// account back to its old address and ends every session of it, this
// browser's too.
func (s *site) undoEmail(w http.ResponseWriter, r *http.Request) {
	code, err := form(w, r, "code")
	if err == nil {
		_, err = s.users.UndoEmailChange(r.Context(), code)
	}
	if err != nil {
		d := undoPage.data(r, code)
		if errors.Is(err, user.ErrEmailTaken) {
			d.Error = "Another account holds that address now, so the change cannot be undone. Nothing was changed."
		}
		s.fail(w, r, err, "code", d, "")
		return
	}
	s.cookie.clear(w)
	seeOther(w, "/?notice=email-restored")
}

// endSession sends the form of one session on the account page: it ends
// that session, or signs this browser out when it is its own.
func (s *site) endSession(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.signedIn(w, r, ""); !ok {
		return
	}
	field, err := form(w, r, "id")
	if err == nil {
		var id uuid.UUID
		if id, err = uuid.Parse(field); err != nil {
			err = user.ErrNoSuchSession
		} else {
			err = s.users.EndSession(r.Context(), s.cookie.token(r), id)
		}
	}
	if err != nil {
		s.fail(w, r, err, "", pageData{}, "/account")
		return
	}
	if _, err := s.users.Me(r.Context(), s.cookie.token(r)); errors.Is(err, user.ErrUnauthenticated) {
		// It was this browser's own.
		s.cookie.clear(w)
		seeOther(w, "/?notice=signed-out")
		return
	}
	seeOther(w, "/account?notice=session-ended-elsewhere")
}

// endOtherSessions sends the account page's "sign out everywhere else".
func (s *site) endOtherSessions(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.signedIn(w, r, ""); !ok {
		return
	}
	_, err := form(w, r, "")
	if err == nil {
		_, err = s.users.EndOtherSessions(r.Context(), s.cookie.token(r))
	}
	if err != nil {
		s.fail(w, r, err, "", pageData{}, "/account")
		return
	}
	seeOther(w, "/account?notice=sessions-ended")
}

// signedIn returns the person the browser's cookie signs in. Without a
// session it sends the browser to the sign-in page (with notice when that
// is "email-changed"), clearing a cookie that no longer signs anyone in,
// and returns false; when the service cannot tell, it says so with a way
// back to the account page.
func (s *site) signedIn(w http.ResponseWriter, r *http.Request, notice string) (user.User, bool) {
	token := s.cookie.token(r)
	if token == "" {
		where := "/"
		if notice == "email-changed" {
			where += "?notice=" + notice
		}
		seeOther(w, where)
		return user.User{}, false
	}
	u, err := s.users.Me(r.Context(), token)
	if err != nil {
		s.fail(w, r, err, "", pageData{}, "/account")
		return user.User{}, false
	}
	return u, true
}

// accountPage fills the account page of u.
func (s *site) accountPage(r *http.Request, u user.User) (pageData, error) {
	d := pageData{Title: "Your account", User: u}
	sessions, err := s.users.Sessions(r.Context(), s.cookie.token(r))
	if err != nil {
		return d, fmt.Errorf("httpapi: account page: sessions: %w", err)
	}
	d.Sessions = sessions
	if s.orgs != nil {
		orgs, err := s.orgs.List(r.Context(), s.cookie.token(r))
		if err != nil {
			return d, fmt.Errorf("httpapi: account page: organizations: %w", err)
		}
		d.OrgsShown, d.Orgs = true, orgs
	}
	if s.activity == nil {
		return d, nil
	}
	items, _, err := s.activity.Page(r.Context(), u.ID, nil, recentActivity)
	if err != nil {
		return d, fmt.Errorf("httpapi: account page: activity: %w", err)
	}
	behind, err := s.activity.Behind(r.Context())
	if err != nil {
		return d, fmt.Errorf("httpapi: account page: activity lag: %w", err)
	}
	d.ActivityShown, d.Behind = true, behind
	for _, it := range items {
		d.Activity = append(d.Activity, activityLine{What: describeActivity(it), At: it.At})
	}
	return d, nil
}

// account serves the account page.
func (s *site) account(w http.ResponseWriter, r *http.Request) {
	q, err := query(r)
	if err != nil {
		s.fail(w, r, err, "", pageData{}, "/account")
		return
	}
	u, ok := s.signedIn(w, r, q.Get("notice"))
	if !ok {
		return
	}
	d, err := s.accountPage(r, u)
	if err != nil {
		s.fail(w, r, err, "", pageData{}, "/account")
		return
	}
	d.Notice = notices[q.Get("notice")]
	s.render(w, r, http.StatusOK, "account", d)
}

// changeEmail sends the account page's form: a confirmation link to the
// new address.
func (s *site) changeEmail(w http.ResponseWriter, r *http.Request) {
	u, ok := s.signedIn(w, r, "")
	if !ok {
		return
	}
	email, err := form(w, r, "new_email")
	if err == nil {
		err = s.users.RequestEmailChange(r.Context(), s.cookie.token(r), email)
	}
	if err != nil {
		d, perr := s.accountPage(r, u)
		if perr != nil {
			err = perr
		}
		d.NewEmail = email
		if errors.Is(err, user.ErrEmailTaken) {
			d.Error = "That is your address already."
		}
		s.fail(w, r, err, "account", d, "")
		return
	}
	seeOther(w, "/account?notice=email-sent")
}

// deleteAccount erases the signed-in account ([user.Service.DeleteAccount])
// once the form's box says that the person means it, clears the cookie,
// and sends the browser to the start, which says so. An unticked box
// changes nothing.
func (s *site) deleteAccount(w http.ResponseWriter, r *http.Request) {
	u, ok := s.signedIn(w, r, "")
	if !ok {
		return
	}
	confirm, err := form(w, r, "confirm")
	if err == nil && confirm != "yes" {
		d, perr := s.accountPage(r, u)
		if perr != nil {
			s.fail(w, r, perr, "", pageData{}, "/account")
			return
		}
		d.Error, d.DeleteRefused = "Tick the box to say that you mean to delete your account.", true
		s.render(w, r, http.StatusBadRequest, "account", d)
		return
	}
	if err == nil {
		err = s.users.DeleteAccount(r.Context(), s.cookie.token(r))
	}
	if err != nil {
		d, perr := s.accountPage(r, u)
		if perr != nil {
			err = perr
		}
		d.DeleteRefused = true
		s.fail(w, r, err, "account", d, "")
		return
	}
	s.cookie.clear(w)
	seeOther(w, "/?notice=deleted")
}

// signOut ends the browser's session. The cookie is cleared whatever the
// service answers, so a person who signs out on a shared computer is
// signed out of it; when the service could not end the session, the page
// says so, and the session ends when it expires. A sign-out from an
// invitation's page, whose form sends the invitation's code, goes back to
// that page, which leads to sign-in as the invited address
// ([site.showInvitation]); any other goes to the start.
func (s *site) signOut(w http.ResponseWriter, r *http.Request) {
	s.cookie.clear(w)
	next, back, label := "/?notice=signed-out", "/", "Go to the start"
	// The code is only where to go next: a form that cannot be read signs
	// out all the same.
	if code, err := form(w, r, "code"); err == nil && code != "" && s.orgs != nil {
		back, label = invitationPath(code), "Back to the invitation"
		next = back + "&notice=signed-out"
	}
	if token := s.cookie.token(r); token != "" {
		// A session that has ended already is as good as ended now.
		if err := s.users.SignOut(r.Context(), token); err != nil && !errors.Is(err, user.ErrUnauthenticated) {
			f, ok := failureOf(r, s.log, err, http.StatusBadRequest)
			if !ok {
				return
			}
			f.setHeaders(w)
			s.render(w, r, f.status, "message", pageData{
				Title: "This browser is signed out",
				Lead:  "The service could not end the session itself just now; it ends when it expires.",
				Next:  back, NextLabel: label,
			})
			return
		}
	}
	seeOther(w, next)
}

// refuseTooMany answers a page's request over the client's limit.
func (s *site) refuseTooMany(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(wait)))
	s.render(w, r, http.StatusTooManyRequests, "message", pageData{
		Title: "Too many requests", Lead: "Wait a little, then go back and try again.", Next: "/", NextLabel: "Back to the start",
	})
}

// refuseCrossOrigin answers a form sent from another site.
func (s *site) refuseCrossOrigin(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusForbidden, "message", pageData{
		Title: "This form came from another site", Lead: "Nothing was changed. Use the form on this site.",
		Next: "/", NextLabel: "Go to the start",
	})
}

// notFound answers a browser that asks for a page that does not exist.
func (s *site) notFound(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusNotFound, "message", pageData{
		Title: "There is no such page", Next: "/", NextLabel: "Go to the start",
	})
}

// wrongMethod answers a browser that uses a page with a method it does not
// take, such as a GET of a form's address.
func (s *site) wrongMethod(allowed string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allowed)
		s.render(w, r, http.StatusMethodNotAllowed, "message", pageData{
			Title: "This page does not take that", Lead: "It takes " + allowed + ".", Next: "/account", NextLabel: "Go to your account",
		})
	}
}

// serveAsset serves one of the pages' static files.
func serveAsset(name, contentType string) http.HandlerFunc {
	body, err := pageFiles.ReadFile("pages/" + name)
	if err != nil {
		panic(err) // The embedded files are part of the binary.
	}
	return func(w http.ResponseWriter, _ *http.Request) {
		pageHeaders(w)
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(body)
	}
}

// pageHeaders keep a page and the code in its address to this service: a
// referrer only to its own origin, no framing, no scripts, styles, forms
// or connections but its own.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
}
