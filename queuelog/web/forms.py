"""The pages' forms (Flask-WTF: every form carries a CSRF token). Labels go through the translations."""

from __future__ import annotations

from typing import Any

from flask import request
from flask_babel import lazy_gettext as _l
from flask_wtf import FlaskForm
from wtforms import (
    BooleanField,
    DateTimeLocalField,
    IntegerField,
    PasswordField,
    SelectChoice,
    SelectField,
    StringField,
    TextAreaField,
)
from wtforms.validators import (
    DataRequired,
    EqualTo,
    InputRequired,
    Length,
    NumberRange,
    Optional,
    StopValidation,
)

from queuelog.access.refusals import PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH
from queuelog.queue.inputs import DEFAULT_MAX_RETRIES, MAX_CRON_LENGTH, MAX_KEY_LENGTH, MAX_RETRIES_LIMIT
from queuelog.queue.types import MAX_DESCRIPTION, NAME_MAX_LENGTH


class PageForm(FlaskForm):
    """A page's form: its data come from the form-encoded (or multipart) body alone. Flask-WTF would read a
    JSON body as the form's data too, which no page sends and whose values need not be text (a number, a
    list, a lone surrogate): such a body counts as an empty form, refused field by field."""

    class Meta(FlaskForm.Meta):
        def wrap_formdata(self, form: Any, formdata: Any) -> Any:
            if request.is_json and not request.form and not request.files:
                formdata = request.form  # empty
            return super().wrap_formdata(form, formdata)


# Our own messages, so that they are translated with the rest of the page in every language we offer.
REQUIRED = _l("This field is required.")


def _length(low: int = -1, high: int = -1) -> Length:
    if low > 0:
        return Length(
            min=low, max=high, message=_l("Use between %(min)d and %(max)d characters.", min=low, max=high)
        )
    return Length(max=high, message=_l("Use at most %(max)d characters.", max=high))


def _whole_number(low: int, high: int) -> NumberRange:
    """A whole number from ``low`` to ``high``, in the words the refusal of one has on every page."""
    return NumberRange(
        low, high, message=_l("Enter a whole number from %(low)s to %(high)s.", low=low, high=high)
    )


def _not_blank(form: FlaskForm, field: PasswordField) -> None:
    if field.data and not field.data.strip():
        raise StopValidation(str(_l("A password cannot be only spaces.")))


def _new_password(label) -> PasswordField:
    """A field for a new password: the rules of ``queuelog.access.refusals.check_password``."""
    return PasswordField(
        label,
        validators=[
            InputRequired(message=REQUIRED),
            _not_blank,
            _length(PASSWORD_MIN_LENGTH, PASSWORD_MAX_LENGTH),
        ],
    )


class LoginForm(PageForm):
    username = StringField(_l("Username"), validators=[DataRequired(message=REQUIRED), _length(high=64)])
    password = PasswordField(_l("Password"), validators=[DataRequired(message=REQUIRED), _length(high=256)])


class SubmitJobForm(PageForm):
    """A job to enqueue. The type and the priority are judged by the queue and the principal, not by the
    menus (which list what was allowed when the page was drawn), so that their refusals are the domain's."""

    type = SelectField(_l("Job type"), validators=[DataRequired(message=REQUIRED)], validate_choice=False)
    payload = TextAreaField(_l("Payload (JSON object)"), default="{}")
    priority = SelectField(_l("Priority"), default="low", validate_choice=False)
    max_retries = IntegerField(
        _l("Max retries"),
        default=DEFAULT_MAX_RETRIES,
        validators=[InputRequired(message=REQUIRED), _whole_number(0, MAX_RETRIES_LIMIT)],
    )
    idempotency_key = StringField(
        _l("Idempotency key (optional)"), validators=[Optional(), _length(high=MAX_KEY_LENGTH)]
    )
    run_at = DateTimeLocalField(
        _l("Start at (optional)"),
        validators=[Optional()],
        format="%Y-%m-%dT%H:%M",
        render_kw={"step": "60"},
    )


class ConfirmForm(PageForm):
    """A form with nothing but its CSRF token, for buttons that change something."""


class UserCreateForm(PageForm):
    username = StringField(_l("Username"), validators=[DataRequired(message=REQUIRED), _length(high=64)])
    role = SelectField(
        _l("Role"), choices=[SelectChoice("producer", _l("producer")), SelectChoice("admin", _l("admin"))]
    )
    password = _new_password(_l("Password"))


class UserRoleForm(PageForm):
    role = SelectField(
        _l("Role"), choices=[SelectChoice("producer", _l("producer")), SelectChoice("admin", _l("admin"))]
    )


class PasswordResetForm(PageForm):
    password = _new_password(_l("New password"))


class PasswordChangeForm(PageForm):
    """Changing one's own password on the settings page."""

    current_password = PasswordField(_l("Current password"), validators=[InputRequired(message=REQUIRED)])
    new_password = _new_password(_l("New password"))
    confirm = PasswordField(
        _l("New password, again"),
        validators=[EqualTo("new_password", message=_l("The two new passwords differ."))],
    )


class KeyCreateForm(PageForm):
    name = StringField(_l("Key name"), validators=[DataRequired(message=REQUIRED), _length(high=64)])
    kind = SelectField(
        _l("Kind"), choices=[SelectChoice("worker", _l("worker")), SelectChoice("producer", _l("producer"))]
    )
    user = SelectField(_l("User (producer keys)"), validators=[Optional()])


class JobTypeForm(PageForm):
    name = StringField(_l("Name"), validators=[DataRequired(message=REQUIRED), _length(high=NAME_MAX_LENGTH)])
    description = TextAreaField(_l("Description"), validators=[_length(high=MAX_DESCRIPTION)])
    payload_schema = TextAreaField(_l("Payload JSON Schema (optional)"))
    enabled = BooleanField(_l("Enabled"), default=True)


class JobTypeEditForm(JobTypeForm):
    """A job type's settings and its flow control (docs/flow-control.md). The limits are text: the queue
    layer judges them (empty is no limit) and its refusals are shown beside each field."""

    concurrency_limit = StringField(_l("Concurrency limit"), render_kw={"inputmode": "numeric"})
    rate_limit = StringField(_l("Rate limit"), render_kw={"inputmode": "numeric"})
    rate_period = StringField(_l("Rate period (seconds)"), render_kw={"inputmode": "numeric"})


class ScheduleForm(PageForm):
    """A schedule (docs/schedules.md); its rules are checked by the queue layer, beside each field."""

    name = StringField(_l("Name"), validators=[DataRequired(message=REQUIRED), _length(high=55)])
    type = SelectField(_l("Job type"), validators=[DataRequired(message=REQUIRED)])
    cron = StringField(_l("Cron expression"), validators=[Optional(), _length(high=MAX_CRON_LENGTH)])
    interval_seconds = IntegerField(
        _l("Or every (seconds)"),
        validators=[Optional()],
        render_kw={"inputmode": "numeric"},
    )
    timezone = SelectField(_l("Time zone"), default="UTC")
    payload = TextAreaField(_l("Payload (JSON object)"), default="{}")
    priority = SelectField(_l("Priority"), default="low")
    max_retries = IntegerField(
        _l("Max retries"),
        default=DEFAULT_MAX_RETRIES,
        validators=[InputRequired(message=REQUIRED), _whole_number(0, MAX_RETRIES_LIMIT)],
    )
    missed = SelectField(
        _l("After downtime"),
        default="fire_once",
        choices=[
            SelectChoice("fire_once", _l("Run once for the missed times")),
            SelectChoice("skip", _l("Skip the missed times")),
        ],
    )
    paused = BooleanField(_l("Paused"))
