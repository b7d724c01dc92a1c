//! Serde of every wire type against samples that use the interface document's exact field
//! names, and query serialisation.

use secrecy::ExposeSecret;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::*;

fn decode<T: DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("sample decodes")
}

fn api_key_list_item_sample() -> Value {
    json!({
        "id": 11, "key": "sk-list-SECRET", "name": "ci", "permissionType": "full",
        "subAccountId": 3, "subAccountName": "marketing", "createdAt": 1700000000000_i64
    })
}

/// API key list item: every documented field.
#[test]
fn api_key_list_item() {
    let item: ApiKeyListItem = decode(api_key_list_item_sample());
    assert_eq!(item.id, 11);
    assert_eq!(item.key.expose_secret(), "sk-list-SECRET");
    assert_eq!(item.name, "ci");
    assert_eq!(item.permission_type, "full");
    assert_eq!(item.sub_account_id, 3);
    assert_eq!(item.sub_account_name, "marketing");
    assert_eq!(item.created_at, 1_700_000_000_000);
    let debug = format!("{item:?}");
    assert!(!debug.contains("SECRET"), "{debug}");
}

/// API key detail and list: every documented field, key redacted in Debug.
#[test]
fn api_key_detail_and_list() {
    let detail: ApiKeyDetail = decode(json!({
        "id": 12, "key": "sk-detail-SECRET", "name": "ci", "allowedIp": "10.0.0.1,10.0.0.2",
        "companyId": 1, "companyName": "Acme", "createdAt": 5, "permissionType": "custom",
        "permissions": [{"id": 2, "name": "send", "detail": "Send email"}],
        "subAccountId": 3, "subAccountName": "marketing"
    }));
    assert_eq!(detail.id, 12);
    assert_eq!(detail.key.expose_secret(), "sk-detail-SECRET");
    assert_eq!(detail.allowed_ip, "10.0.0.1,10.0.0.2");
    assert_eq!(detail.company_id, 1);
    assert_eq!(detail.company_name, "Acme");
    assert_eq!(detail.created_at, 5);
    assert_eq!(detail.permission_type, "custom");
    assert_eq!(
        detail.permissions,
        vec![Permission {
            id: 2,
            name: "send".into(),
            detail: "Send email".into()
        }]
    );
    assert_eq!(detail.sub_account_id, 3);
    assert_eq!(detail.sub_account_name, "marketing");
    assert!(!format!("{detail:?}").contains("SECRET"));

    let list: ApiKeyList = decode(json!({"apiKeys": [api_key_list_item_sample()], "count": 41}));
    assert_eq!(list.count, 41);
    assert_eq!(list.api_keys[0].id, 11);
    assert!(!format!("{list:?}").contains("SECRET"));
}

/// Absent and null optional fields default; `id` is required; unknown fields are ignored.
#[test]
fn defaults_nulls_and_unknown_fields() {
    let detail: ApiKeyDetail =
        decode(json!({"id": 1, "permissions": null, "name": null, "brandNew": {"x": 1}}));
    assert!(detail.permissions.is_empty());
    assert_eq!(detail.name, "");
    assert_eq!(detail.key.expose_secret(), "");
    assert!(serde_json::from_value::<ApiKeyDetail>(json!({"name": "x"})).is_err());
    assert!(serde_json::from_value::<SubAccountListItem>(json!({"id": "1"})).is_err());
    assert!(
        serde_json::from_value::<SendingDomainDetail>(json!({"id": 1, "spfVerified": "yes"}))
            .is_err()
    );
}

/// Sub account list item uses `name`, the detail `subAccountName`.
#[test]
fn sub_account_types() {
    let list: SubAccountList = decode(json!({
        "count": 2,
        "subAccounts": [{"id": 3, "name": "marketing", "status": "active", "createdAt": 7}]
    }));
    assert_eq!(list.count, 2);
    assert_eq!(
        list.sub_accounts,
        vec![SubAccountListItem {
            id: 3,
            name: "marketing".into(),
            status: "active".into(),
            created_at: 7
        }]
    );

    let detail: SubAccountDetail = decode(json!({
        "id": 3, "companyId": 1, "subAccountName": "marketing", "status": "active",
        "createdAt": 7, "ipPoolId": 4, "ipPoolName": "shared",
        "apiKeys": [api_key_list_item_sample()],
        "domains": [{"id": 9, "domain": "mail.example.com", "createdAt": 8, "updatedAt": 10}]
    }));
    assert_eq!(detail.id, 3);
    assert_eq!(detail.company_id, 1);
    assert_eq!(detail.sub_account_name, "marketing");
    assert_eq!(detail.status, "active");
    assert_eq!(detail.created_at, 7);
    assert_eq!(detail.ip_pool_id, 4);
    assert_eq!(detail.ip_pool_name, "shared");
    assert_eq!(detail.api_keys[0].key.expose_secret(), "sk-list-SECRET");
    assert_eq!(
        detail.domains,
        vec![SubAccountDomain {
            id: 9,
            domain: "mail.example.com".into(),
            created_at: 8,
            updated_at: 10
        }]
    );
    assert!(!format!("{detail:?}").contains("SECRET"));
}

/// The list item spells `subAccountID` and has a string status; the detail spells
/// `subAccountId` and has a status array.
#[test]
fn sending_domain_types() {
    let wire = json!([{
        "count": 1,
        "sendingDomain": [{
            "id": 9, "domain": "mail.example.com", "assignment": "company", "companyId": 1,
            "createdAt": 8, "default": true, "status": "pending", "subAccountID": 3,
            "subAccountName": "marketing", "types": ["sending"]
        }]
    }]);
    let pages: Vec<SendingDomainList> = decode(wire);
    let item = &pages[0].sending_domain[0];
    assert_eq!(pages[0].count, 1);
    assert_eq!(
        *item,
        SendingDomainListItem {
            id: 9,
            domain: "mail.example.com".into(),
            assignment: "company".into(),
            company_id: 1,
            created_at: 8,
            default: true,
            status: "pending".into(),
            sub_account_id: 3,
            sub_account_name: "marketing".into(),
            types: vec!["sending".into()],
        }
    );
    // Serialising keeps the quirky spelling.
    let back = serde_json::to_value(item).unwrap();
    assert_eq!(back["subAccountID"], 3);
    assert!(back.get("subAccountId").is_none());

    let detail: SendingDomainDetail = decode(json!({
        "id": 9, "domain": "mail.example.com", "assignment": "company", "createdAt": 8,
        "status": ["pending"], "types": ["sending"], "subAccountId": 3,
        "subAccountName": "marketing", "trackingDomainId": 5, "trackingDomainName": "t.example.com",
        "spfHostname": "mail.example.com", "spfValue": "v=spf1 include:x ~all", "spfVerified": true,
        "dkimSelector": "mt", "dkimHostname": "mt._domainkey.mail.example.com",
        "dkimValue": "k=rsa; p=PUB", "dkimPublicKey": "PUB", "dkimPrivateKey": "PRIVATE-SECRET",
        "dkimVerified": false, "cnameHostname": "track.mail.example.com",
        "cnameValue": "t.example.com", "cnameVerified": true
    }));
    assert_eq!(detail.status, vec!["pending".to_owned()]);
    assert_eq!(detail.sub_account_id, 3);
    assert_eq!(detail.tracking_domain_id, 5);
    assert_eq!(detail.tracking_domain_name, "t.example.com");
    assert_eq!(detail.spf_hostname, "mail.example.com");
    assert_eq!(detail.spf_value, "v=spf1 include:x ~all");
    assert!(detail.spf_verified);
    assert_eq!(detail.dkim_selector, "mt");
    assert_eq!(detail.dkim_hostname, "mt._domainkey.mail.example.com");
    assert_eq!(detail.dkim_value, "k=rsa; p=PUB");
    assert_eq!(detail.dkim_public_key, "PUB");
    assert_eq!(detail.dkim_private_key.expose_secret(), "PRIVATE-SECRET");
    assert!(!detail.dkim_verified);
    assert_eq!(detail.cname_hostname, "track.mail.example.com");
    assert_eq!(detail.cname_value, "t.example.com");
    assert!(detail.cname_verified);
    assert!(!detail.is_verified());
    assert!(!format!("{detail:?}").contains("PRIVATE-SECRET"));

    // Tolerated variants: the other spelling of the sub account id, a bare status string.
    let tolerant: SendingDomainDetail =
        decode(json!({"id": 1, "subAccountID": 4, "status": "verified"}));
    assert_eq!(tolerant.sub_account_id, 4);
    assert_eq!(tolerant.status, vec!["verified".to_owned()]);
    assert!(serde_json::from_value::<SendingDomainDetail>(json!({"id": 1, "status": 5})).is_err());
}

/// SPF helpers.
#[test]
fn spf_types() {
    let unverified: UnverifiedSpfList =
        decode(json!({"count": 1, "data": [{"id": 9, "name": "mail.example.com"}]}));
    assert_eq!(
        unverified,
        UnverifiedSpfList {
            count: 1,
            data: vec![UnverifiedSpf {
                id: 9,
                name: "mail.example.com".into()
            }]
        }
    );
    let suggestion: SpfSuggestion = decode(json!({
        "note": "merge", "spfRecords": ["v=spf1 -all"], "suggestion": "v=spf1 include:x -all"
    }));
    assert_eq!(suggestion.note, "merge");
    assert_eq!(suggestion.spf_records, vec!["v=spf1 -all".to_owned()]);
    assert_eq!(suggestion.suggestion, "v=spf1 include:x -all");
}

/// A full transmission uses the documented names (`allRCPTto`, `optionsAttributes`, ...);
/// a minimal one leaves every optional field out, `transactional` included.
#[test]
fn transmission_body() {
    let full = Transmission {
        subject: "Hi".into(),
        from: EmailAddress::new("a@example.com", "A"),
        to: vec![EmailAddress::email("b@example.com")],
        reply_to: Some(vec![EmailAddress::email("r@example.com")]),
        cc: Some(vec![]),
        bcc: Some(vec![]),
        body_text: Some("text".into()),
        body_html: Some("<p>html</p>".into()),
        headers: Some(vec![Header {
            name: "X-A".into(),
            value: "1".into(),
        }]),
        attachments: Some(vec![Attachment {
            content_id: Some("c1".into()),
            disposition: Some("inline".into()),
            filename: Some("a.txt".into()),
            mime_type: Some("text/plain".into()),
            value: Some("aGk=".into()),
        }]),
        metadata: Some([("k".to_owned(), "v".to_owned())].into()),
        options_attributes: Some(OptionsAttributes {
            click_tracking: Some(true),
            open_tracking: Some(false),
            transactional: Some(false),
        }),
        template_id: Some("tpl".into()),
        substitution_data: Some([("name".to_owned(), "B".to_owned())].into()),
        all_rcpt_to: Some(vec!["b@example.com".into()]),
    };
    let value = serde_json::to_value(&full).unwrap();
    assert_eq!(
        value,
        json!({
            "subject": "Hi",
            "from": {"email": "a@example.com", "name": "A"},
            "to": [{"email": "b@example.com"}],
            "replyTo": [{"email": "r@example.com"}],
            "cc": [], "bcc": [],
            "bodyText": "text", "bodyHtml": "<p>html</p>",
            "headers": [{"name": "X-A", "value": "1"}],
            "attachments": [{"contentId": "c1", "disposition": "inline", "filename": "a.txt",
                             "mimeType": "text/plain", "value": "aGk="}],
            "metadata": {"k": "v"},
            "optionsAttributes": {"clickTracking": true, "openTracking": false, "transactional": false},
            "templateId": "tpl",
            "substitutionData": {"name": "B"},
            "allRCPTto": ["b@example.com"]
        })
    );
    let back: Transmission = serde_json::from_value(value).unwrap();
    assert_eq!(back, full);

    let minimal = Transmission {
        subject: "Hi".into(),
        from: EmailAddress::email("a@example.com"),
        to: vec![EmailAddress::email("b@example.com")],
        options_attributes: Some(OptionsAttributes::default()),
        ..Default::default()
    };
    assert_eq!(
        serde_json::to_value(&minimal).unwrap(),
        json!({
            "subject": "Hi",
            "from": {"email": "a@example.com"},
            "to": [{"email": "b@example.com"}],
            "optionsAttributes": {}
        })
    );
    let accepted: TransmissionAccepted = decode(json!({"transmissionId": "tx-1"}));
    assert_eq!(accepted.transmission_id, "tx-1");
}

/// Request bodies of keys and sub accounts use the documented names and leave `None` out.
#[test]
fn request_bodies() {
    assert_eq!(
        serde_json::to_value(CreateApiKey::default()).unwrap(),
        json!({})
    );
    assert_eq!(
        serde_json::to_value(CreateApiKey {
            allowed_ip: Some("1.2.3.4".into()),
            name: Some("ci".into()),
            permission_ids: Some(vec![1, 2]),
        })
        .unwrap(),
        json!({"allowedIp": "1.2.3.4", "name": "ci", "permissionIds": [1, 2]})
    );
    assert_eq!(
        serde_json::to_value(UpdateApiKey {
            permission_type: Some("full".into()),
            ..Default::default()
        })
        .unwrap(),
        json!({"permissionType": "full"})
    );
    assert_eq!(
        serde_json::to_value(CreateSubAccount {
            name: Some("m".into()),
            status: Some("active".into()),
            ip_pool_id: Some(4),
            allowed_ips: Some("1.2.3.4".into()),
            create_api_key: Some(true),
            api_key_name: Some("k".into()),
            permission_ids: Some(vec![1]),
            permission_type: Some("full".into()),
        })
        .unwrap(),
        json!({"name": "m", "status": "active", "ipPoolId": 4, "allowedIps": "1.2.3.4",
               "createApiKey": true, "apiKeyName": "k", "permissionIds": [1],
               "permissionType": "full"})
    );
    assert_eq!(
        serde_json::to_value(UpdateSubAccount {
            ip_pool_id: Some(4),
            ..Default::default()
        })
        .unwrap(),
        json!({"ipPoolId": 4})
    );
    assert_eq!(
        serde_json::to_value(CreateSendingDomain {
            domain: "mail.example.com".into(),
            ..Default::default()
        })
        .unwrap(),
        json!({"domain": "mail.example.com"})
    );
}

/// Analytics: every documented field.
#[test]
fn analytics_types() {
    let summary: AnalyticsSummary = decode(json!({
        "name": "all", "period": {"from": "2024-01-01", "to": "2024-01-31"},
        "sent": 10, "delivered": 9, "opened": 5, "clicked": 2, "bounced": 1, "unsubscribed": 1,
        "deliveryRate": 0.9, "openRate": 0.5, "clickRate": 0.2, "bounceRate": 0.1,
        "unsubscribeRate": 0.1
    }));
    assert_eq!(summary.name, "all");
    assert_eq!(summary.period.from, "2024-01-01");
    assert_eq!(summary.period.to, "2024-01-31");
    assert_eq!(
        (
            summary.sent,
            summary.delivered,
            summary.opened,
            summary.clicked
        ),
        (10, 9, 5, 2)
    );
    assert_eq!((summary.bounced, summary.unsubscribed), (1, 1));
    assert_eq!(summary.delivery_rate, 0.9);
    assert_eq!(summary.open_rate, 0.5);
    assert_eq!(summary.click_rate, 0.2);
    assert_eq!(summary.bounce_rate, 0.1);
    assert_eq!(summary.unsubscribe_rate, 0.1);
    // Integer rates are fine as numbers.
    let integral: AnalyticsSummary = decode(json!({"deliveryRate": 1}));
    assert_eq!(integral.delivery_rate, 1.0);

    let status: TransmissionStatus = decode(json!({
        "transmissionId": "tx-1", "subject": "Hi", "status": "sent", "createdAt": 3,
        "recipientCount": 2, "from": {"email": "a@example.com", "name": "A"},
        "stats": {"delivered": 2, "opened": 1, "clicked": 1, "bounced": 0, "unsubscribed": 0}
    }));
    assert_eq!(status.transmission_id, "tx-1");
    assert_eq!(status.subject, "Hi");
    assert_eq!(status.status, "sent");
    assert_eq!(status.created_at, 3);
    assert_eq!(status.recipient_count, 2);
    assert_eq!(status.from.email, "a@example.com");
    assert_eq!(status.from.name, "A");
    assert_eq!(
        status.stats,
        TransmissionStats {
            delivered: 2,
            opened: 1,
            clicked: 1,
            bounced: 0,
            unsubscribed: 0
        }
    );

    let events: TransmissionEvents = decode(json!({"events": [{
        "type": "click", "recipient": "b@example.com", "friendlyFrom": "A <a@example.com>",
        "subject": "Hi", "reason": "", "timestamp": 4, "url": "https://x.example",
        "userAgent": "UA"
    }]}));
    let event = &events.events[0];
    assert_eq!(event.event_type, "click");
    assert_eq!(event.recipient, "b@example.com");
    assert_eq!(event.friendly_from, "A <a@example.com>");
    assert_eq!(event.subject, "Hi");
    assert_eq!(event.timestamp, 4);
    assert_eq!(event.url, "https://x.example");
    assert_eq!(event.user_agent, "UA");
}

/// Queries leave every unset parameter out (so the documented defaults apply) and use the
/// documented names.
#[test]
fn query_serialisation() {
    fn query_of<Q: serde::Serialize>(query: &Q) -> Option<String> {
        let request = reqwest::Client::new()
            .get("http://localhost/x")
            .query(query)
            .build()
            .expect("query encodes");
        request.url().query().map(str::to_owned)
    }
    assert_eq!(query_of(&ListApiKeysQuery::default()), None);
    assert_eq!(query_of(&ListSubAccountsQuery::default()), None);
    assert_eq!(query_of(&ListSendingDomainsQuery::default()), None);
    assert_eq!(
        query_of(&ListApiKeysQuery {
            page: Some(2),
            size: Some(100),
            search: Some("a b&c".into()),
            sort: Some("name".into()),
            sub_account_id: Some(3),
            permission_type: Some("full".into()),
        })
        .as_deref(),
        Some("page=2&size=100&search=a+b%26c&sort=name&subAccountId=3&permissionType=full")
    );
    assert_eq!(
        query_of(&ListSubAccountsQuery {
            has_api_key: Some(false),
            status: Some("active".into()),
            ..Default::default()
        })
        .as_deref(),
        Some("status=active&hasApiKey=false")
    );
    assert_eq!(
        query_of(&ListSendingDomainsQuery {
            page: Some(1),
            search: Some("mail".into()),
            ..Default::default()
        })
        .as_deref(),
        Some("page=1&search=mail")
    );
    assert_eq!(
        query_of(&AnalyticsQuery {
            from: "2024-01-01".into(),
            to: "2024-01-31".into(),
            ..Default::default()
        })
        .as_deref(),
        Some("from=2024-01-01&to=2024-01-31")
    );
    assert_eq!(
        query_of(&BreakdownQuery {
            from: "a".into(),
            to: "b".into(),
            group_by: Some("domain".into()),
            sandbox: Some(true),
            sandbox_sub_account_id: Some(7),
        })
        .as_deref(),
        Some("from=a&to=b&groupBy=domain&sandbox=true&sandboxSubAccountId=7")
    );
}
