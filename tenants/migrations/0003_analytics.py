# Analytics results (usage, invoices, lag, job runs), plan prices the billing job needs, group lag SLOs.

import django.db.models.deletion
from decimal import Decimal
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0002_control_plane'),
    ]

    operations = [
        migrations.RenameField(
            model_name='plan',
            old_name='price_per_million_messages',
            new_name='price_per_million_requests',
        ),
        migrations.AlterField(
            model_name='plan',
            name='price_per_million_requests',
            field=models.DecimalField(decimal_places=4, default=Decimal('0'), help_text='Per million requests in 4 KiB units, in and out (a message up to 4 KiB is one).', max_digits=12),
        ),
        migrations.AddField(
            model_name='plan',
            name='price_per_gb_in',
            field=models.DecimalField(decimal_places=4, default=Decimal('0'), max_digits=12),
        ),
        migrations.AddField(
            model_name='consumergroup',
            name='lag_slo_messages',
            field=models.PositiveBigIntegerField(blank=True, help_text='Lag SLO in messages; minutes above it are reported.', null=True),
        ),
        migrations.AddField(
            model_name='consumergroup',
            name='lag_slo_seconds',
            field=models.PositiveIntegerField(blank=True, help_text='Lag SLO in seconds (age of the oldest unconsumed message).', null=True),
        ),
        migrations.AddField(
            model_name='plan',
            name='currency',
            field=models.CharField(default='USD', max_length=3),
        ),
        migrations.AddField(
            model_name='plan',
            name='price_per_gb_out',
            field=models.DecimalField(decimal_places=4, default=Decimal('0'), max_digits=12),
        ),
        migrations.AddField(
            model_name='plan',
            name='price_per_topic_day',
            field=models.DecimalField(decimal_places=4, default=Decimal('0'), max_digits=12),
        ),
        migrations.AlterField(
            model_name='plan',
            name='price_per_gb_month',
            field=models.DecimalField(decimal_places=4, default=Decimal('0'), help_text='Storage; billed per GB-hour / 730.', max_digits=12),
        ),
        migrations.CreateModel(
            name='Invoice',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('namespace', models.CharField(max_length=64)),
                ('period_start', models.DateField()),
                ('period_end', models.DateField()),
                ('plan', models.CharField(max_length=64)),
                ('currency', models.CharField(default='USD', max_length=3)),
                ('days_billed', models.PositiveIntegerField(default=0)),
                ('base_amount', models.DecimalField(decimal_places=6, default=0, max_digits=20)),
                ('usage_amount', models.DecimalField(decimal_places=6, default=0, max_digits=20)),
                ('total', models.DecimalField(decimal_places=2, default=0, max_digits=14)),
                ('final', models.BooleanField(default=False, help_text="The month's last day has been billed.")),
                ('updated', models.DateTimeField(auto_now=True)),
                ('tenant', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='invoices', to='tenants.tenant')),
            ],
            options={
                'ordering': ('-period_start', 'namespace'),
            },
        ),
        migrations.CreateModel(
            name='InvoiceLine',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('namespace', models.CharField(max_length=64)),
                ('date', models.DateField()),
                ('plan', models.CharField(max_length=64)),
                ('item', models.CharField(max_length=32)),
                ('quantity_raw', models.BigIntegerField(help_text='Requests, bytes, byte-hours or topic-days.')),
                ('quantity', models.DecimalField(decimal_places=6, max_digits=24)),
                ('unit', models.CharField(max_length=16)),
                ('unit_price', models.DecimalField(decimal_places=4, max_digits=12)),
                ('price_unit', models.CharField(max_length=64)),
                ('amount', models.DecimalField(decimal_places=6, max_digits=20)),
                ('currency', models.CharField(default='USD', max_length=3)),
                ('invoice', models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='lines', to='tenants.invoice')),
                ('tenant', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='invoice_lines', to='tenants.tenant')),
            ],
            options={
                'ordering': ('-date', 'namespace', 'item'),
            },
        ),
        migrations.CreateModel(
            name='JobRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('job', models.CharField(choices=[('billing', 'Billing'), ('lag', 'Consumer lag')], max_length=16)),
                ('date', models.DateField()),
                ('status', models.CharField(choices=[('running', 'Running'), ('succeeded', 'Succeeded'), ('failed', 'Failed'), ('skipped', 'Skipped (the same job and day was already running)')], default='running', max_length=16)),
                ('trigger', models.CharField(choices=[('schedule', 'Nightly schedule'), ('manual', 'On demand')], default='manual', max_length=16)),
                ('attempt', models.PositiveIntegerField(default=1)),
                ('master', models.CharField(blank=True, max_length=200)),
                ('started', models.DateTimeField(auto_now_add=True)),
                ('finished', models.DateTimeField(blank=True, null=True)),
                ('duration_s', models.FloatField(blank=True, null=True)),
                ('rows_in', models.BigIntegerField(default=0)),
                ('rows_out', models.BigIntegerField(default=0)),
                ('error', models.TextField(blank=True)),
                ('details', models.JSONField(blank=True, default=dict, help_text="The job's summary: every day it ran.")),
            ],
            options={
                'ordering': ('-started', '-id'),
                'constraints': [models.UniqueConstraint(condition=models.Q(('status', 'running')), fields=('job', 'date'), name='tenants_jobrun_one_running', violation_error_message='This job is already running for this day.')],
            },
        ),
        migrations.CreateModel(
            name='LagDaily',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('namespace', models.CharField(max_length=64)),
                ('group_name', models.CharField(max_length=100)),
                ('date', models.DateField()),
                ('minutes_sampled', models.PositiveIntegerField(default=0)),
                ('p50_lag_messages', models.BigIntegerField(default=0)),
                ('p95_lag_messages', models.BigIntegerField(default=0)),
                ('max_lag_messages', models.BigIntegerField(default=0)),
                ('p50_lag_ms', models.BigIntegerField(default=0)),
                ('p95_lag_ms', models.BigIntegerField(default=0)),
                ('max_lag_ms', models.BigIntegerField(default=0)),
                ('lag_slo_messages', models.BigIntegerField(blank=True, null=True)),
                ('lag_slo_seconds', models.BigIntegerField(blank=True, null=True)),
                ('minutes_above_slo', models.PositiveIntegerField(blank=True, help_text='Null: no SLO set.', null=True)),
                ('stuck_minutes', models.PositiveIntegerField(default=0)),
                ('stuck_queues', models.PositiveIntegerField(default=0)),
                ('prev_week_p95_lag_messages', models.FloatField(blank=True, null=True)),
                ('prev_week_p95_lag_ms', models.FloatField(blank=True, null=True)),
                ('trend_lag_messages_pct', models.FloatField(blank=True, null=True)),
                ('trend_lag_ms_pct', models.FloatField(blank=True, null=True)),
                ('group', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='lag_days', to='tenants.consumergroup')),
                ('tenant', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='lag_days', to='tenants.tenant')),
            ],
            options={
                'ordering': ('-date', 'namespace', 'group_name'),
            },
        ),
        migrations.CreateModel(
            name='UsageDaily',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('namespace', models.CharField(max_length=64)),
                ('date', models.DateField()),
                ('messages_in', models.BigIntegerField(default=0)),
                ('messages_out', models.BigIntegerField(default=0)),
                ('requests_in_4k', models.BigIntegerField(default=0)),
                ('requests_out_4k', models.BigIntegerField(default=0)),
                ('bytes_in', models.BigIntegerField(default=0)),
                ('bytes_out', models.BigIntegerField(default=0)),
                ('api_calls', models.BigIntegerField(default=0)),
                ('storage_byte_hours', models.BigIntegerField(default=0)),
                ('storage_gb_hours', models.DecimalField(decimal_places=6, default=0, max_digits=24)),
                ('topic_days', models.BigIntegerField(default=0)),
                ('tenant', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='usage_days', to='tenants.tenant')),
            ],
            options={
                'ordering': ('-date', 'namespace'),
            },
        ),
        migrations.AddConstraint(
            model_name='invoice',
            constraint=models.UniqueConstraint(fields=('namespace', 'period_start'), name='tenants_invoice_unique_month'),
        ),
        migrations.AddConstraint(
            model_name='invoiceline',
            constraint=models.UniqueConstraint(fields=('namespace', 'date', 'item'), name='tenants_invoiceline_unique_item'),
        ),
        migrations.AddConstraint(
            model_name='lagdaily',
            constraint=models.UniqueConstraint(fields=('namespace', 'group_name', 'date'), name='tenants_lagdaily_unique_day'),
        ),
        migrations.AddConstraint(
            model_name='usagedaily',
            constraint=models.UniqueConstraint(fields=('namespace', 'date'), name='tenants_usagedaily_unique_day'),
        ),
    ]
