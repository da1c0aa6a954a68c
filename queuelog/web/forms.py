"""The pages' forms (Flask-WTF: every form carries a CSRF token). Labels go through the translations."""

from __future__ import annotations

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
from wtforms.validators import DataRequired, Length, NumberRange, Optional


class LoginForm(FlaskForm):
    username = StringField(_l("Username"), validators=[DataRequired(), Length(max=64)])
    password = PasswordField(_l("Password"), validators=[DataRequired(), Length(max=256)])


class SubmitJobForm(FlaskForm):
    type = SelectField(_l("Job type"), validators=[DataRequired()])
    payload = TextAreaField(_l("Payload (JSON object)"), default="{}")
    priority = SelectField(_l("Priority"), default="low")
    max_retries = IntegerField(_l("Max retries"), default=3, validators=[NumberRange(0, 25)])
    idempotency_key = StringField(_l("Idempotency key (optional)"), validators=[Optional(), Length(max=255)])
    run_at = DateTimeLocalField(_l("Start at (optional)"), validators=[Optional()], format="%Y-%m-%dT%H:%M")


class ConfirmForm(FlaskForm):
    """A form with nothing but its CSRF token, for buttons that change something."""


class UserCreateForm(FlaskForm):
    username = StringField(_l("Username"), validators=[DataRequired(), Length(max=64)])
    role = SelectField(
        _l("Role"), choices=[SelectChoice("producer", _l("producer")), SelectChoice("admin", _l("admin"))]
    )
    password = PasswordField(_l("Password"), validators=[DataRequired(), Length(min=8, max=256)])


class UserRoleForm(FlaskForm):
    role = SelectField(
        _l("Role"), choices=[SelectChoice("producer", _l("producer")), SelectChoice("admin", _l("admin"))]
    )


class PasswordResetForm(FlaskForm):
    password = PasswordField(_l("New password"), validators=[DataRequired(), Length(min=8, max=256)])


class KeyCreateForm(FlaskForm):
    name = StringField(_l("Key name"), validators=[DataRequired(), Length(max=64)])
    kind = SelectField(
        _l("Kind"), choices=[SelectChoice("worker", _l("worker")), SelectChoice("producer", _l("producer"))]
    )
    user = SelectField(_l("User (producer keys)"), validators=[Optional()])


class JobTypeForm(FlaskForm):
    name = StringField(_l("Name"), validators=[DataRequired(), Length(max=64)])
    description = TextAreaField(_l("Description"), validators=[Length(max=2000)])
    payload_schema = TextAreaField(_l("Payload JSON Schema (optional)"))
    enabled = BooleanField(_l("Enabled"), default=True)
